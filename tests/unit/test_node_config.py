"""The node's rendered supervisord.conf, read back by supervisord's own parser (no sockets)."""

from __future__ import annotations

import argparse
import json
import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
from supervisor.datatypes import RestartUnconditionally
from supervisor.options import ServerOptions

from utils.config.errors import ConfigError
from utils.config.settings import Settings
from utils.node.config import child_environment, encode_environment, render_config, write_config
from utils.node.layout import NodeLayout, parse_services, resolve_layout
from utils.node.status import format_table, process_rows

SERVICES = ["redis", "zookeeper", "kafka", "postgres"]
COMPONENTS = ["kafka-monitor", "redis-monitor", "rest", "sink", "revisit", "warc"]


def _args(overrides: list[str], **extra: Any) -> argparse.Namespace:
    defaults = {"set": overrides, "log_level": None, "settings": None, "crawlers": 1, "renderers": 0,
                "services": None,
                "node": "n1"}  # fmt: skip
    return argparse.Namespace(**{**defaults, **extra})


def _node(
    tmp_path: Path, overrides: list[str] | None = None, environ: dict[str, str] | None = None, **extra: Any
) -> tuple[Settings, argparse.Namespace, NodeLayout]:
    """Settings, CLI args and layout as `shoal -s ... up` would have them, run dir under tmp_path."""
    args = _args([f"RUN_DIR={tmp_path / 'run'}", *(overrides or [])], **extra)
    pairs = args.set + ([f"LOG_LEVEL={args.log_level}"] if args.log_level else [])
    settings = Settings.load(settings_file=args.settings, environ=environ or {}, overrides=pairs)
    return settings, args, resolve_layout(settings, args.node, args.services)


def _parse(
    tmp_path: Path, overrides: list[str] | None = None, environ: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    """Render, write and parse the config as supervisord does: {"group:name": process config}."""
    settings, args, layout = _node(tmp_path, overrides, environ, **extra)
    environment = child_environment(settings, args, layout, environ or {})
    path = write_config(layout, render_config(layout, args.crawlers, environment, renderers=args.renderers))
    options = ServerOptions()
    options.configfile = str(path)
    options.process_config(do_usage=False)
    return {
        f"{group.name}:{process.name}": process
        for group in options.process_group_configs
        for process in group.process_configs
    }


def test_every_program_of_a_node_is_rendered(tmp_path: Path) -> None:
    programs = _parse(tmp_path)

    expected = [f"services:{name}" for name in SERVICES] + [f"shoal:{name}" for name in COMPONENTS]
    assert sorted(programs) == sorted([*expected, "shoal:crawler-00", "shoal:renderer-00"])
    redis = programs["services:redis"]
    assert shlex.split(redis.command)[1:] == ["-m", "utils.cli.main", "service", "redis", "--node", "n1"]
    assert Path(redis.directory) == Path(__file__).resolve().parents[2]
    assert shlex.split(programs["shoal:rest"].command)[1:] == ["-m", "utils.cli.main", "rest"]


def test_programs_restart_with_back_off_and_log_to_rotated_files(tmp_path: Path) -> None:
    programs = _parse(tmp_path, crawlers=2)

    for name, program in programs.items():
        assert program.autorestart is RestartUnconditionally, name
        assert (program.startsecs, program.startretries) == (2, 20), name
        assert program.stopasgroup, name
        assert program.killasgroup, name
        assert program.redirect_stderr, name
        assert program.stdout_logfile == str(tmp_path / "run" / "n1" / "logs" / f"{program.name}.log")
        assert (program.stdout_logfile_maxbytes, program.stdout_logfile_backups) == (10 * 1024 * 1024, 5)
    assert programs["shoal:crawler-01"].stopwaitsecs == 30
    assert programs["services:redis"].priority < programs["shoal:rest"].priority


@pytest.mark.parametrize("crawlers", [1, 3])
def test_crawlers_are_numbered_processes_of_one_program(tmp_path: Path, crawlers: int) -> None:
    programs = _parse(tmp_path, crawlers=crawlers)

    names = sorted(name for name in programs if "crawler" in name)
    assert names == [f"shoal:crawler-{n:02d}" for n in range(crawlers)]
    assert all(programs[name].autostart for name in names)
    assert shlex.split(programs[names[-1]].command)[1:] == ["-m", "utils.cli.main", "crawl", "--spider", "link"]


def test_render_nodes_run_render_spiders_and_no_link_crawler(tmp_path: Path) -> None:
    programs = _parse(tmp_path, crawlers=0, renderers=2)

    names = sorted(name for name in programs if "renderer" in name)
    assert names == ["shoal:renderer-00", "shoal:renderer-01"]
    assert all(programs[name].autostart for name in names)
    assert shlex.split(programs[names[0]].command)[1:] == ["-m", "utils.cli.main", "crawl", "--spider", "render"]
    assert programs[names[0]].autorestart is RestartUnconditionally
    assert programs["shoal:crawler-00"].autostart is False


def test_no_renderers_by_default_renders_one_that_does_not_start(tmp_path: Path) -> None:
    programs = _parse(tmp_path)

    assert programs["shoal:renderer-00"].autostart is False
    assert "shoal:renderer-01" not in programs


def test_no_crawlers_renders_one_that_does_not_start(tmp_path: Path) -> None:
    programs = _parse(tmp_path, crawlers=0)

    assert programs["shoal:crawler-00"].autostart is False
    assert "shoal:crawler-01" not in programs


@pytest.mark.parametrize(
    ("services", "started"),
    [(None, SERVICES[:3]), ("none", []), ("redis", ["redis"]), ("kafka, zookeeper", ["zookeeper", "kafka"])],
)
def test_only_local_services_autostart(tmp_path: Path, services: str | None, started: list[str]) -> None:
    programs = _parse(tmp_path, services=services)

    assert [name for name in SERVICES if programs[f"services:{name}"].autostart] == started
    assert all(programs[f"shoal:{name}"].autostart for name in COMPONENTS if name not in ("sink", "revisit", "warc"))


def test_local_services_default_to_the_setting(tmp_path: Path) -> None:
    programs = _parse(tmp_path, ["LOCAL_SERVICES=none"])

    assert not any(programs[f"services:{name}"].autostart for name in SERVICES)


def test_overridden_settings_reach_every_program_as_the_same_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("local.json").write_text(json.dumps({"QUEUE_WINDOW": 30}))
    overrides = [
        "REDIS_PORT=7001",
        "KAFKA_HOSTS=127.0.0.1:7002,127.0.0.1:7003",
        'KAFKA_MONITOR_PLUGINS={"kafka_monitor.plugins.crawl.CrawlHandler": null, "my.Plugin": 5}',
        "ROBOTSTXT_OBEY=false",
        "USER_AGENT=Mozilla/5.0 (X11; 100% it's)",
    ]
    environ = {"SHOAL_QUEUE_HITS": "7", "HOME": "/nowhere"}
    parent, _args, _layout = _node(tmp_path, overrides, environ, settings="local.json", log_level="DEBUG")

    programs = _parse(tmp_path, overrides, environ, settings="local.json", log_level="DEBUG")

    for program in programs.values():
        env = program.environment
        assert env["SHOAL_SETTINGS"] == str(tmp_path / "local.json")
        assert env["SHOAL_RUN_DIR"] == str(tmp_path / "run")
        assert "HOME" not in env
        child = Settings.load(environ=env)
        for name in ("REDIS_PORT", "KAFKA_HOSTS", "KAFKA_MONITOR_PLUGINS", "ROBOTSTXT_OBEY", "USER_AGENT",
                     "LOG_LEVEL", "QUEUE_HITS", "QUEUE_WINDOW", "RUN_DIR"):  # fmt: skip
            assert child[name] == parent[name], name
    assert child["KAFKA_MONITOR_PLUGINS"].get("kafka_monitor.plugins.crawl.CrawlHandler") is None  # disabled


def test_settings_not_overridden_are_not_passed(tmp_path: Path) -> None:
    programs = _parse(tmp_path, ["REDIS_PORT=7001"])

    env = programs["shoal:rest"].environment
    assert sorted(env) == ["PYTHONUNBUFFERED", "SHOAL_REDIS_PORT", "SHOAL_RUN_DIR"]


@pytest.mark.parametrize("value", ["a\nb", "'quoted'", "x ; comment", "both ' and \""])
def test_a_value_supervisord_would_garble_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="SHOAL_USER_AGENT"):
        encode_environment({"SHOAL_USER_AGENT": value})


def test_postgres_and_the_sink_start_only_when_postgres_is_a_local_service(tmp_path: Path) -> None:
    default = _parse(tmp_path / "a")
    assert not default["services:postgres"].autostart
    assert not default["shoal:sink"].autostart
    assert not default["shoal:revisit"].autostart  # issue 31: revisits need the sink's tables
    with_pg = _parse(tmp_path / "b", services="kafka,redis,zookeeper,postgres")
    assert with_pg["services:postgres"].autostart
    assert with_pg["shoal:sink"].autostart
    assert with_pg["shoal:revisit"].autostart
    assert shlex.split(with_pg["shoal:revisit"].command)[1:] == ["-m", "utils.cli.main", "revisit"]
    assert with_pg["services:postgres"].stopsignal == signal.SIGINT  # fast shutdown: SIGTERM waits for clients
    assert shlex.split(with_pg["shoal:sink"].command)[1:] == ["-m", "utils.cli.main", "sink"]


def test_services_are_named_in_a_fixed_order_and_checked() -> None:
    assert parse_services("redis,kafka") == ("redis", "kafka")
    assert parse_services("none") == ()
    assert parse_services("") == ()
    with pytest.raises(ConfigError, match="kafak"):
        parse_services("kafak")


def test_ports_come_from_the_first_host_of_each_list(tmp_path: Path) -> None:
    overrides = ["KAFKA_HOSTS=10.0.0.1:7002,10.0.0.2:7003", "ZOOKEEPER_HOSTS=10.0.0.3:7004,10.0.0.4:7005",
                 "REDIS_PORT=7001", "REST_PORT=7006", "SINK_POSTGRES_DSN=host=10.0.0.5,10.0.0.6 port=7007 dbname=x"]
    _settings, _args, layout = _node(tmp_path, overrides, services="kafka")

    assert layout.service_addresses() == {
        "kafka": "127.0.0.1:7002",  # a local service listens on 127.0.0.1 whatever the host says
        "redis": "127.0.0.1:7001",
        "zookeeper": "10.0.0.3:7004",
        "rest": "127.0.0.1:7006",
        "postgres": "10.0.0.5:7007",
    }
    assert layout.run_dir == tmp_path / "run" / "n1"


def test_a_run_dir_too_deep_for_a_unix_socket_is_refused(tmp_path: Path) -> None:
    _settings, _args, layout = _node(tmp_path, [f"RUN_DIR={tmp_path / ('d' * 120)}"])

    with pytest.raises(ConfigError, match="RUN_DIR"):
        layout.check_socket_path()


def test_status_rows_name_processes_by_group() -> None:
    info = {"group": "shoal", "name": "crawler-00", "statename": "RUNNING", "pid": 42, "start": 100,
            "now": 3825, "exitstatus": 0, "description": "pid 42", "stdout_logfile": "/x.log"}  # fmt: skip

    backoff = {**info, "name": "rest", "statename": "BACKOFF", "pid": 0, "description": "x"}
    rows = process_rows([info, backoff])

    assert [(row["name"], row["state"], row["pid"], row["uptime"]) for row in rows] == [
        ("shoal:crawler-00", "RUNNING", 42, 3725),
        ("shoal:rest", "BACKOFF", 0, 0),
    ]
    assert "1:02:05" in format_table(rows)
