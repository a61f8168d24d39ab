"""Render the repository's `supervisord.conf` template for one node, with the children's environment.

Settings reach the children as `SHOAL_<NAME>` variables written into the rendered file (not only
inherited), so the file alone restarts the same node by hand. Supervisord reads an `environment=`
line with a non-POSIX shlex, `%`-expands it and strips inline `;`/`#` comments: every value is
quoted and escaped here, and one that cannot survive that is refused with a ConfigError.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from string import Template
from typing import Any

from utils.config.errors import ConfigError
from utils.config.settings import ENV_PREFIX, SETTINGS_FILE_ENV, Settings, default_values
from utils.node.layout import NODE_SERVICES, NodeLayout, repo_root

TEMPLATE_PATH = repo_root() / "supervisord.conf"
_INLINE_COMMENT = re.compile(r"\s[;#]")


def overridden_names(args: argparse.Namespace) -> list[str]:
    """Names of the settings given on the command line (`-s NAME=VALUE`, `-ll LEVEL`)."""
    names = [pair.partition("=")[0].strip() for pair in getattr(args, "set", None) or []]
    if getattr(args, "log_level", None):
        names.append("LOG_LEVEL")
    return list(dict.fromkeys(names))


def env_value(name: str, value: Any) -> str:
    """A setting as its `SHOAL_*` string: lists comma-joined, dicts as JSON, bools true/false.

    A dict names the default keys it lacks as null: the child merges it over the defaults, and
    only a null removes a key there (a plugin disabled on our command line stays disabled).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        default = default_values().get(name)
        removed = {key: None for key in default if key not in value} if isinstance(default, dict) else {}
        return json.dumps({**removed, **value}, separators=(",", ":"))
    return "" if value is None else str(value)


def child_environment(
    settings: Settings, args: argparse.Namespace, layout: NodeLayout, environ: Mapping[str, str]
) -> dict[str, str]:
    """`SHOAL_*` of our environment, then the command-line overrides, settings file and run root."""
    env = {key: value for key, value in environ.items() if key.startswith(ENV_PREFIX)}
    settings_file = getattr(args, "settings", None) or environ.get(SETTINGS_FILE_ENV)
    if settings_file:
        env[SETTINGS_FILE_ENV] = str(Path(settings_file).absolute())  # children run in the repo root
    for name in overridden_names(args):
        env[ENV_PREFIX + name] = env_value(name, settings[name])
    env[ENV_PREFIX + "RUN_DIR"] = str(layout.run_root)  # absolute, for the same reason
    env["PYTHONUNBUFFERED"] = "1"  # log lines reach the supervisord log files as they are written
    return env


def _quote(key: str, value: str) -> str:
    """`value` quoted for supervisord's `environment=`; ConfigError if it cannot be written there."""
    reason = ""
    if "\n" in value or "\r" in value:
        reason = "it spans lines"
    elif value[:1] in ("'", '"') or value[-1:] in ("'", '"'):
        reason = "supervisord strips quotes at its ends"
    elif _INLINE_COMMENT.search(value):
        reason = "supervisord would read ' ;' or ' #' as a comment"
    elif "'" in value and '"' in value:
        reason = "it holds both kinds of quote"
    if reason:
        raise ConfigError(f"cannot pass {key} to the node's programs: {reason}; use a settings file instead")
    quote = '"' if "'" in value else "'"
    return quote + value.replace("%", "%%") + quote


def encode_environment(env: Mapping[str, str]) -> str:
    """`KEY='value',...` for an `environment=` line of supervisord.conf."""
    return ",".join(f"{key}={_quote(key, value)}" for key, value in sorted(env.items()))


def _path(value: Path | str) -> str:
    """A path for supervisord.conf; refused with a `%`, which supervisord expands once or twice
    depending on the option (a log file path twice, an environment value once)."""
    if "%" in str(value):
        raise ConfigError(f"supervisord cannot take a path with '%': {value}")
    return str(value)


def _autostart(name: str, local: Iterable[str]) -> str:
    return "true" if name in local else "false"


def render_config(
    layout: NodeLayout,
    crawlers: int,
    environment: Mapping[str, str],
    python: str = sys.executable,
    template: Path = TEMPLATE_PATH,
    renderers: int = 0,
    spider: str = "link",
    warc: bool = False,
) -> str:
    """The node's supervisord.conf text; KeyError if the template uses an unknown placeholder.

    `renderers` are processes of the `render` spider (a browser each): a node meant for them runs
    `shoal up --crawlers 0 --renderers N`, so render nodes can be the machines with the memory.
    """
    for option, count in (("--crawlers", crawlers), ("--renderers", renderers)):
        if count < 0:
            raise ConfigError(f"{option} must be 0 or more, got {count}")
    values = {
        "python": shlex.quote(_path(python)),  # a command line: a venv path may hold spaces
        "repo": _path(repo_root()),
        "node": _path(layout.node),
        "run_dir": _path(layout.run_dir),
        "crawlers": str(max(crawlers, 1)),  # supervisord needs numprocs >= 1
        "spider": _path(spider),
        "crawler_autostart": "true" if crawlers > 0 else "false",
        "renderers": str(max(renderers, 1)),
        "renderer_autostart": "true" if renderers > 0 else "false",
        "environment": encode_environment(environment),
        **{f"{name}_autostart": _autostart(name, layout.local) for name in NODE_SERVICES},
        "sink_autostart": _autostart("postgres", layout.local),  # else `supervisorctl start shoal:sink`
        "warc_autostart": "true" if warc else "false",  # WARC_ENABLED or `shoal up --warc`
    }
    return Template(template.read_text(encoding="utf-8")).substitute(values)


def write_config(layout: NodeLayout, text: str) -> Path:
    """Write the rendered config into the run dir (created with its logs dir), readable by us only."""
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    path = layout.config_path
    path.write_text(text, encoding="utf-8")
    os.chmod(path, 0o600)  # it may carry a Redis password
    return path
