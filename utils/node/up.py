"""`shoal up`: render the node's supervisord.conf, start supervisord, wait for the local services.

Only the services are awaited (each must answer its probe): the components start under supervisord
and restart with its back-off until their services answer, so `up` does not judge their health.
A node whose services do not come up is stopped again, so a second `up` starts from scratch.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from utils.config.errors import ConfigError
from utils.config.settings import Settings
from utils.node.config import child_environment, render_config, write_config
from utils.node.control import (
    RPC_ERRORS,
    NodeError,
    process_info,
    running_pid,
    start_supervisord,
    stop_node,
)
from utils.node.layout import NODE_SERVICES, NodeLayout, repo_root, resolve_layout
from utils.node.status import format_addresses, format_table, process_rows
from utils.services.argv import HOST
from utils.services.local import PROBES
from utils.services.process import log_tail, port_in_use

SERVICE_TIMEOUT = 120.0  # seconds for every local service to answer its probe (a JVM Kafka: ~10 s)
SPAWN_TIMEOUT = 5.0  # seconds for supervisord to spawn every autostart program (for the summary)
POLL_INTERVAL = 0.2  # seconds between probe rounds


def _check_ports(layout: NodeLayout) -> None:
    """ConfigError for a port out of range, or a local service's port taken (its probe would
    answer for someone else)."""
    for name, (host, port) in layout.addresses.items():
        if not 0 < port < 65536:
            raise ConfigError(f"{name}: port {port} of {host} is not a TCP port (1-65535)")
    for name in layout.local:
        if port_in_use(HOST, layout.port(name)):
            raise ConfigError(
                f"{name}: port {layout.port(name)} is already in use by another process; "
                f"choose another port or leave {name} out of --services"
            )


def prepare(settings: Settings, args: argparse.Namespace, layout: NodeLayout) -> None:
    """Check the node can start, then write its supervisord.conf and node.json into the run dir."""
    layout.check_socket_path()
    _check_ports(layout)
    environment = child_environment(settings, args, layout, os.environ)
    renderers = getattr(args, "renderers", 0)
    spider = getattr(args, "spider", "link")
    warc = settings.get_bool("WARC_ENABLED") or bool(getattr(args, "warc", False))
    write_config(layout, render_config(layout, args.crawlers, environment, renderers=renderers, spider=spider,
                                       warc=warc))
    state = {**layout.to_json(), "crawlers": args.crawlers, "renderers": renderers, "repo": str(repo_root())}
    layout.state_path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def _started_elsewhere(layout: NodeLayout) -> str | None:
    """The checkout the running node was started from when it is not this one (the checkout moved)."""
    try:
        recorded = json.loads(layout.state_path.read_text(encoding="utf-8")).get("repo")
    except (OSError, ValueError, AttributeError):
        return None
    return str(recorded) if recorded and recorded != str(repo_root()) else None


def _service_states(layout: NodeLayout) -> dict[str, str]:
    """Supervisor state of each service program; empty when supervisord does not answer."""
    try:
        infos = process_info(layout)
    except RPC_ERRORS:
        return {}
    return {info["name"]: info["statename"] for info in infos if info["group"] == "services"}


def wait_services(layout: NodeLayout, timeout: float = SERVICE_TIMEOUT) -> tuple[str, str] | None:
    """None once every local service answers; else (service, why) for the first that did not."""
    deadline = time.monotonic() + timeout
    pending = list(layout.local)
    while True:
        pending = [name for name in pending if not PROBES[name](HOST, layout.port(name))]
        if not pending:
            return None
        states = _service_states(layout)
        fatal = [name for name in pending if states.get(name) == "FATAL"]
        if fatal:
            return fatal[0], "exited too often; supervisord gave up restarting it (FATAL)"
        if time.monotonic() >= deadline:
            return pending[0], f"did not answer on {layout.address(pending[0])} within {timeout:g} s"
        time.sleep(POLL_INTERVAL)


def _spawned_rows(layout: NodeLayout, crawlers: int, renderers: int = 0) -> list[dict[str, object]]:
    """The process rows once supervisord has spawned every autostart program (or SPAWN_TIMEOUT)."""
    idle = {f"services:{name}" for name in NODE_SERVICES if name not in layout.local}
    if "postgres" not in layout.local:
        idle.add("shoal:sink")
    if crawlers == 0:
        idle.add("shoal:crawler-00")
    if renderers == 0:
        idle.add("shoal:renderer-00")
    deadline = time.monotonic() + SPAWN_TIMEOUT
    while True:
        rows = process_rows(process_info(layout))
        waiting = [row for row in rows if row["state"] == "STOPPED" and row["name"] not in idle]
        if not waiting or time.monotonic() >= deadline:
            return rows
        time.sleep(POLL_INTERVAL)


def _print_summary(layout: NodeLayout, pid: int, crawlers: int, renderers: int) -> None:
    print(f"node {layout.node} is up: supervisord pid {pid}, run dir {layout.run_dir}")
    print(format_addresses(layout.service_addresses(), layout.local))
    try:
        print(format_table(_spawned_rows(layout, crawlers, renderers)))
    except RPC_ERRORS as exc:
        print(f"(cannot list the processes: {exc})")
    print(f"logs: {layout.log_dir}/<program>.log, supervisord: {layout.supervisord_log}")
    print(f"control: shoal status|down --node {layout.node}, or supervisorctl -c {layout.config_path}")


def _fail(layout: NodeLayout, pid: int, name: str, why: str) -> int:
    """Print why a service did not come up with its log tail, stop the node, exit code 1."""
    log_path = layout.log_path(name)
    print(f"shoal up: {name} {why}; last lines of {log_path}:")
    print(log_tail(log_path), end="")
    print(f"stopping node {layout.node}", flush=True)
    stop_node(layout, pid)
    return 1


def up_command(settings: Settings, args: argparse.Namespace) -> int:
    """Start the node; 0 when it runs (also when it already did), 1 when it did not come up."""
    try:
        layout = resolve_layout(settings, args.node, args.services)
        pid = running_pid(layout)
        if pid is not None and _started_elsewhere(layout) is None:
            print(f"node {layout.node} is already running (supervisord pid {pid}); "
                  f"see `shoal status --node {layout.node}`")  # fmt: skip
            return 0
        if pid is not None:  # its programs name paths that no longer exist: a restart would fail
            print(f"node {layout.node} runs from {_started_elsewhere(layout)}, where this checkout was "
                  f"before it moved: restarting it from {repo_root()}", flush=True)  # fmt: skip
            stop_node(layout, pid)
        prepare(settings, args, layout)
    except ConfigError as exc:
        print(f"shoal up: {exc}")
        return 2
    try:
        pid = start_supervisord(layout)
    except NodeError as exc:
        print(f"shoal up: {exc}")
        return 1
    failure = wait_services(layout)
    if failure is not None:
        return _fail(layout, pid, *failure)
    _print_summary(layout, pid, args.crawlers, getattr(args, "renderers", 0))
    return 0
