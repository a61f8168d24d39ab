"""The JSON Schema files of every message, compiled once, with their defaults filled in.

The files in this package are the only definition of each message kind: the kafka monitor, the
REST gateway and the docs all read them from here; `matching` decides which kind a message is.
May import: `utils.observability`, `utils.config`.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

import fastjsonschema

from utils.config.errors import InvalidMessage

Validator = Any  # a compiled fastjsonschema function: dict -> dict with defaults filled


@cache
def schema(name: str) -> dict[str, Any]:
    """The parsed schema file `<name>.json` of this package."""
    text = resources.files(__package__).joinpath(f"{name}.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@cache
def _compiled(name: str) -> Validator:
    return fastjsonschema.compile(schema(name), use_default=True)


def validate(name: str, message: Any) -> dict[str, Any]:
    """A deep copy of `message` with defaults filled; `InvalidMessage` names the failing field."""
    candidate = copy.deepcopy(message)
    try:
        result: dict[str, Any] = _compiled(name)(candidate)
    except fastjsonschema.JsonSchemaValueException as exc:
        path = ".".join(str(p) for p in (exc.path or [])[1:])
        cause = f"{path}: {exc.message}" if path else exc.message
        raise InvalidMessage(f"invalid {name} request", cause=cause) from exc
    return result


def available() -> list[str]:
    """Names of every schema file shipped with this package."""
    return sorted(p.name[:-5] for p in resources.files(__package__).iterdir() if p.name.endswith(".json"))
