"""Issue 35: a node runs the warc program under supervisord, started only when asked (no sockets)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from supervisor.options import ServerOptions

from utils.cli.main import build_parser
from utils.config.settings import Settings
from utils.node.config import render_config, write_config
from utils.node.layout import resolve_layout


def _warc_program(tmp_path: Path, warc: bool) -> tuple[bool, str]:
    settings = Settings.load(environ={}, overrides=[f"RUN_DIR={tmp_path / 'run'}"])
    layout = resolve_layout(settings, "n1", None)
    path = write_config(layout, render_config(layout, 1, {}, warc=warc))
    options = ServerOptions()
    options.configfile = str(path)
    options.process_config(do_usage=False)
    (program,) = [p for g in options.process_group_configs for p in g.process_configs if p.name == "warc"]
    return program.autostart, program.command


@pytest.mark.parametrize("warc", [False, True])
def test_the_warc_program_is_there_and_starts_only_when_asked(tmp_path: Path, warc: bool) -> None:
    autostart, command = _warc_program(tmp_path, warc)
    assert autostart is warc
    assert command.endswith("-m utils.cli.main warc")


def test_shoal_up_takes_warc_and_shoal_warc_takes_burst() -> None:
    parser = build_parser()
    up: argparse.Namespace = parser.parse_args(["up", "--warc"])
    assert up.warc is True
    assert parser.parse_args(["warc", "--burst"]).burst is True
    assert Settings.load(environ={}).get_bool("WARC_ENABLED") is False
