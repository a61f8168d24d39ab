"""Layered settings: defaults < settings file < `SHOAL_*` environment < command line.

Every component reads its configuration through one `Settings` object. Values keep the type of
their default: an environment string is parsed into that type, so `SHOAL_QUEUE_HITS=20` is an int
and `SHOAL_KAFKA_HOSTS=a:9092,b:9092` a list. Dict settings merge key by key (as Scrapy Cluster's
`PLUGINS`), so a file can add or disable one plugin without restating the others.
"""

from __future__ import annotations

import json
import os
import re
import runpy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from utils.config import default_settings
from utils.config.errors import ConfigError

ENV_PREFIX = "SHOAL_"
SETTINGS_FILE_ENV = "SHOAL_SETTINGS"  # path of the optional settings file; not a setting itself
KAFKA_LIBS_ENV = "SHOAL_KAFKA_LIBS"  # the broker jars' directory (utils/services/kafka.py), not a setting
KAFKA_HEAP_ENV = "SHOAL_KAFKA_HEAP"  # the local broker's JVM heap options (utils/services/kafka.py)
NOT_SETTINGS = frozenset({SETTINGS_FILE_ENV, KAFKA_LIBS_ENV, KAFKA_HEAP_ENV})  # SHOAL_* variables read as they are
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def default_values() -> dict[str, Any]:
    """The defaults module as a dict of its UPPERCASE names."""
    return {k: v for k, v in vars(default_settings).items() if k.isupper()}


class Settings(Mapping[str, Any]):
    """Immutable, typed view of the merged settings."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    @classmethod
    def load(
        cls,
        settings_file: str | Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | Iterable[str] | None = None,
    ) -> Settings:
        """Merge the four layers; an unknown name in any layer is a `ConfigError`."""
        environ = os.environ if environ is None else environ
        values = default_values()
        path = settings_file or environ.get(SETTINGS_FILE_ENV)
        if path:
            _merge(values, _read_file(Path(path)), f"settings file {path}")
        _merge(values, _from_environ(environ, values), "environment")
        if overrides is not None:
            pairs = overrides if isinstance(overrides, Mapping) else _parse_pairs(overrides)
            _merge(values, {k: coerce(k, v, values) for k, v in pairs.items()}, "command line")
        return cls(values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def copy_with(self, **changes: Any) -> Settings:
        """A new Settings with some values replaced (tests and sub-processes)."""
        unknown = set(changes) - set(self._values)
        if unknown:
            raise ConfigError(f"unknown settings: {sorted(unknown)}")
        return Settings({**self._values, **changes})

    def get_str(self, name: str) -> str:
        return str(self._values[name])

    def get_int(self, name: str) -> int:
        return int(self._values[name])

    def get_float(self, name: str) -> float:
        return float(self._values[name])

    def get_bool(self, name: str) -> bool:
        return bool(self._values[name])

    def get_list(self, name: str) -> list[str]:
        value = self._values[name]
        return _split(value) if isinstance(value, str) else [str(v) for v in value]

    def get_dict(self, name: str) -> dict[str, Any]:
        return dict(self._values[name])

    # Derived names, kept here so that no component rebuilds them differently.
    def topic(self, suffix: str) -> str:
        """`<prefix>.<suffix>`, e.g. topic("crawled_firehose")."""
        return f"{self.get_str('KAFKA_TOPIC_PREFIX')}.{suffix}"

    def appid_topic(self, kind: str, appid: Any) -> str | None:
        """`<prefix>.<kind>_<appid>` when KAFKA_APPID_TOPICS is on and that is a legal Kafka topic name.

        The schemas keep appids to topic-legal characters, but a message from before them, or a long
        prefix, could still make an illegal name: the broker refuses it, and the send was retried forever.
        """
        if not appid or not isinstance(appid, str) or not self.get_bool("KAFKA_APPID_TOPICS"):
            return None
        name = self.topic(f"{kind}_{appid}")
        return name if valid_topic(name) else None

    @property
    def incoming_topic(self) -> str:
        return self.get_str("KAFKA_INCOMING_TOPIC") or self.topic("incoming")

    @property
    def zookeeper_config_path(self) -> str:
        return self.get_str("ZOOKEEPER_ASSIGN_PATH").rstrip("/") + "/" + self.get_str("ZOOKEEPER_ID")


def coerce(name: str, raw: Any, defaults: Mapping[str, Any]) -> Any:
    """Parse `raw` into the type of the default of `name`; strings come from env or CLI."""
    if name not in defaults:
        raise ConfigError(f"unknown setting {name!r}")
    default = defaults[name]
    if not isinstance(raw, str) or isinstance(default, str):
        return raw
    try:
        return _parse_as(default, raw.strip())
    except ValueError as exc:
        raise ConfigError(f"setting {name}: cannot read {raw!r} as {type(default).__name__}") from exc


def _parse_as(default: Any, raw: str) -> Any:
    if isinstance(default, bool):
        lowered = raw.lower()
        if lowered in _TRUE | _FALSE:
            return lowered in _TRUE
        raise ValueError(raw)
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    if isinstance(default, list):
        return json.loads(raw) if raw.startswith("[") else _split(raw)
    if isinstance(default, dict):
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError(raw)
        return parsed
    return raw


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _merge(values: dict[str, Any], layer: Mapping[str, Any], origin: str) -> None:
    for name, value in layer.items():
        if name not in values:
            raise ConfigError(f"unknown setting {name!r} in {origin}")
        if isinstance(values[name], dict) and isinstance(value, dict):
            values[name] = {**values[name], **value}  # None values stay: they disable a plugin
        else:
            values[name] = value


def _read_file(path: Path) -> dict[str, Any]:
    """A settings file is Python (like Scrapy Cluster's localsettings.py) or JSON."""
    if not path.is_file():
        raise ConfigError(f"settings file {path} does not exist")
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ConfigError(f"settings file {path} must hold a JSON object")
        return data
    return {k: v for k, v in runpy.run_path(str(path)).items() if k.isupper()}


def _from_environ(environ: Mapping[str, str], defaults: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key in NOT_SETTINGS:
            continue
        name = key[len(ENV_PREFIX) :]
        if name not in defaults:
            raise ConfigError(f"unknown environment variable {key}: no setting named {name}")
        found[name] = coerce(name, raw, defaults)
    return found


def _parse_pairs(pairs: Iterable[str]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ConfigError(f"expected NAME=VALUE, got {pair!r}")
        parsed[name.strip()] = value
    return parsed


_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def valid_topic(name: str) -> bool:
    """Kafka's rule for topic names: 1-249 of ASCII letters, digits, '.', '_', '-'; not '.' or '..'."""
    return name not in (".", "..") and _TOPIC.fullmatch(name) is not None
