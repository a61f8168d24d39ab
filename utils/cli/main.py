"""`shoal`: one command for every component and every operator task.

Components are imported lazily by dotted path, so `utils` (the shared core) never imports a
component package and each subcommand loads only what it runs.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from utils.config.errors import ConfigError, ShoalError
from utils.config.log import setup_logging
from utils.config.settings import Settings

Command = Callable[[Settings, argparse.Namespace], int | None]


def _component(path: str) -> Command:
    """A command that runs `module:function(settings, args)` of a component package."""

    def run(settings: Settings, args: argparse.Namespace) -> int | None:
        module_name, _, func = path.partition(":")
        result: int | None = getattr(importlib.import_module(module_name), func)(settings, args)
        return result

    return run


COMMANDS: dict[str, tuple[str, str]] = {
    # name: (dotted "module:function", help)
    "kafka-monitor": ("kafka_monitor.main:main", "run a kafka monitor: incoming topic -> Redis"),
    "crawl": ("crawler.main:main", "run a crawler process (one spider)"),
    "spiders": ("crawler.registry:spiders_command", "list the spiders a crawler can run, and where each comes from"),
    "new-spider": ("utils.cli.new_spider:new_spider_command", "write a working skeleton of a user spider"),
    "redis-monitor": ("redis_monitor.main:main", "run a redis monitor: actions, stats, expiry, reaper"),
    "rest": ("rest.main:main", "run the REST gateway"),
    "sink": ("sink.main:main", "run a sink: pages and items from Kafka into PostgreSQL"),
    "revisit": ("revisit.main:main", "feed due revisits to the incoming topic; status/pause/resume/drop a crawl's"),
    "warc": ("warc.main:main", "run a warc writer: the crawled firehose into WARC/1.1 files with CDXJ indexes"),
    "feed": ("utils.cli.kafka_tools:feed_command", "send request(s) to the incoming topic"),
    "dump": ("utils.cli.kafka_tools:dump_command", "print the messages of a topic"),
    "up": ("utils.node:up_command", "start a node: local services and every component under supervisord"),
    "down": ("utils.node:down_command", "stop everything `shoal up` started"),
    "status": ("utils.node:status_command", "show every process of the node"),
    "service": ("utils.node:service_command", "exec one local service (used by supervisord)"),
    "demo": ("utils.cli.demo:demo_command", "serve the demo site, feed a crawl and show its pages"),
    "proxies": ("utils.cli.proxies:proxies_command", "show the proxy pool: requests, bans, quarantines"),
    "domain": ("utils.cli.domain:domain_command", "show, list, set or reset a domain's block escalation ladder"),
    "apps": ("utils.cli.apps:apps_command", "the apps sharing the cluster: figures, quotas (show, set, remove)"),
    "keys": ("utils.cli.apps:keys_command", "REST API keys per app: create (shown once), list, revoke"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shoal", description=__doc__.splitlines()[0])
    parser.add_argument("--settings", help="settings file (.py or .json); also SHOAL_SETTINGS")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting (repeatable)",
    )
    parser.add_argument("-ll", "--log-level", help="shortcut for -s LOG_LEVEL=...")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_path, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text)
        _add_arguments(name, command_parser)
        if name == "domain":
            from utils.cli.domain import add_arguments

            add_arguments(command_parser)
        if name in ("apps", "keys"):
            from utils.cli import apps

            (apps.add_apps_arguments if name == "apps" else apps.add_keys_arguments)(command_parser)
    return parser


def _add_arguments(name: str, p: argparse.ArgumentParser) -> None:
    if name == "crawl":
        p.add_argument("--spider", default="link", help="spider name (see `shoal spiders`)")
    if name == "new-spider":
        p.add_argument("name", help="spider name: lowercase letters, digits and _")
        p.add_argument("--dir", default=".", help="directory to write <name>.py into")
    if name in ("kafka-monitor", "redis-monitor", "sink", "warc"):
        p.add_argument("--burst", action="store_true", help="process what is there, then exit")
    if name == "revisit":
        p.add_argument("--burst", action="store_true", help="feed what is due, then exit")
        p.add_argument("action", nargs="?", default="run", choices=["run", "status", "pause", "resume", "drop"])
        p.add_argument("appid", nargs="?", help="the crawl's appid (status/pause/resume/drop)")
        p.add_argument("crawlid", nargs="?", help="the crawl's crawlid")
    if name == "feed":
        p.add_argument("json", nargs="?", help="one JSON request; '-' or omitted: one per line on stdin")
        p.add_argument("-f", "--file", help="a file with one JSON request per line")
        p.add_argument("--follow", action="store_true", help="show the crawl's progress until it finishes")
    if name == "dump":
        p.add_argument("topic", help="topic name, or a suffix such as crawled_firehose")
        p.add_argument("-b", "--from-beginning", action="store_true")
        p.add_argument("-nb", "--no-body", action="store_true", help="leave out page bodies")
        p.add_argument("-jb", "--just-body", action="store_true", help="print only page bodies")
        p.add_argument("--markdown", action="store_true", help="print only pages' Markdown (crawls with `extract`)")
        p.add_argument("-p", "--pretty", action="store_true")
        p.add_argument("-d", "--decode-base64", action="store_true", help="decode base64 bodies")
        p.add_argument("-n", "--max-messages", type=int, default=0, help="stop after N messages")
        p.add_argument("--timeout", type=float, default=0, help="stop after N idle seconds (0 = never)")
        p.add_argument("-c", "--consumer-group", default=None)
    if name == "up":
        p.add_argument("--crawlers", type=int, default=1, help="crawler processes on this node")
        p.add_argument("--renderers", type=int, default=0, help="render spiders (headless Chromium) on this node")
        p.add_argument("--spider", default="link", help="the spider the crawlers run (see `shoal spiders`)")
        p.add_argument("--services", default=None, help="local services: kafka,redis,zookeeper[,postgres] | none")
        p.add_argument("--node", default="default", help="node name (its own run directory)")
        p.add_argument("--warc", action="store_true", help="start the warc writer too (WARC_ENABLED)")
    if name in ("down", "status"):
        p.add_argument("--node", default="default")
    if name in ("status", "proxies"):
        p.add_argument("--json", action="store_true", help="machine-readable output")
    if name == "service":
        p.add_argument("name", choices=["redis", "zookeeper", "kafka", "postgres"])
        p.add_argument("--node", default="default")
    if name == "demo":
        p.add_argument("--hosts", type=int, default=3)
        p.add_argument("--pages", type=int, default=200, help="pages per host")
        p.add_argument("--port", type=int, default=8181)
        p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the crawl")


def load_settings(args: argparse.Namespace) -> Settings:
    overrides = list(args.set)
    if args.log_level:
        overrides.append(f"LOG_LEVEL={args.log_level}")
    return Settings.load(settings_file=args.settings, overrides=overrides)


DATA_ON_STDOUT = {"dump"}  # commands whose stdout is records for a pipe: their logs go to stderr


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(args)
    except ConfigError as exc:
        print(f"shoal: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings, component=args.command, stdout_is_data=args.command in DATA_ON_STDOUT)
    _serve_metrics(settings, args.command)
    command = _component(COMMANDS[args.command][0])
    try:
        result = command(settings, args)
    except ShoalError as exc:  # a service out of reach, bad settings found late: one line, no traceback
        print(f"shoal {args.command}: {exc}", file=sys.stderr)
        return 1
    return int(result or 0)


# Long-running components and the name their metrics carry.
METRICS_COMPONENTS = {
    "kafka-monitor": "kafka-monitor",
    "crawl": "crawler",
    "redis-monitor": "redis-monitor",
    "rest": "rest",
    "sink": "sink",
    "warc": "warc",
}


def _serve_metrics(settings: Settings, command: str) -> None:
    """Every long-running component serves Prometheus metrics; the redis monitor also the frontier's."""
    component = METRICS_COMPONENTS.get(command)
    if component is None:
        return
    from utils.frontier.metrics import register_frontier_collector
    from utils.observability.metrics import start_metrics_server

    start_metrics_server(settings, component)
    if component == "redis-monitor":
        from utils.config.clients import redis_client
        from utils.frontier.capacity import register_capacity_collector
        from utils.frontier.ladder_metrics import register_ladder_collector
        from utils.observability.metrics.group_lag import register_group_lag_collector
        from utils.proxies.metrics import register_proxy_collector

        register_frontier_collector(settings)
        register_capacity_collector(settings, redis_client(settings))  # the autoscaling signal (issue 32)
        register_group_lag_collector(settings)  # ... and the kafka monitors' and sinks' (issue 32)
        register_proxy_collector(settings, redis_client(settings))
        register_ladder_collector(settings, redis_client(settings))  # ladder levels, Redis memory (issue 33)
        from utils.apps.metrics import register_apps_collector

        register_apps_collector(redis_client(settings, decode=True))  # per-app figures


def stop_event_on_signals() -> threading.Event:
    """An event set by SIGTERM/SIGINT; a second signal exits at once (STYLE.md: loops)."""
    stop = threading.Event()

    def handler(signum: int, _frame: Any) -> None:
        if stop.is_set():
            raise SystemExit(128 + signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


if __name__ == "__main__":
    sys.exit(main())
