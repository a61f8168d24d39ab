"""Which request a message is: the request schemas tried in rank order, compiled once.

One module for the kafka monitor (its plugins' schemas, on the hot path) and the REST gateway
(`POST /feed`), so both accept, fill defaults and refuse in the same way. When no schema accepts a
message, the complaint given is the one of the schema that knows most of its fields: that is the
kind the sender meant (a crawl request with a bad `url`, not "not an action request").

Copies: `utils.schemas.validate` deep-copies every message so that a failed attempt cannot leave
another schema's defaults behind; that copy alone costs about 2 µs, 4 % of the 50 µs a message may
take at 20,000 messages/s. Defaults are filled at the top level only, so a shallow copy per attempt
is enough; a deep one is kept for schemas with defaults below the top level (a custom plugin's).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

import fastjsonschema

from utils import schemas
from utils.config.errors import InvalidMessage

NO_SCHEMA = "Did not find schema to validate request"  # Scrapy Cluster's log event and answer

Check = Callable[[dict[str, Any]], dict[str, Any]]
Score = Callable[[dict[str, Any]], tuple[int, int]]
T = TypeVar("T")


@cache
def definition(name: str) -> dict[str, Any]:
    """A schema of utils/schemas by name, or a plugin's own schema file (a path ending in .json)."""
    if name.endswith(".json"):
        loaded: dict[str, Any] = json.loads(Path(name).read_text())
        return loaded
    return schemas.schema(name)


@cache
def checker(name: str) -> Check:
    """`message -> message with defaults`; raises InvalidMessage naming the failing field."""
    schema = definition(name)
    compiled = fastjsonschema.compile(schema, use_default=True)
    kind = Path(name).stem if name.endswith(".json") else name
    duplicate: Callable[[dict[str, Any]], dict[str, Any]] = copy.deepcopy if _nested_defaults(schema) else dict

    def check(message: dict[str, Any]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = compiled(duplicate(message))
        except fastjsonschema.JsonSchemaValueException as exc:
            raise InvalidMessage(f"invalid {kind} request", cause=describe(exc)) from None
        return result

    return check


@cache
def fields_checker(name: str, fields: tuple[str, ...]) -> Check:
    """`checker` for `fields` of schema `name` only (their rules, required ones required, defaults
    filled); the message's other fields are neither checked nor copied into the result."""
    schema = definition(name)
    properties = {field: schema["properties"][field] for field in fields}
    required = [field for field in schema.get("required", ()) if field in fields]
    part = {"type": "object", "properties": properties, "required": required}
    compiled = fastjsonschema.compile(part, use_default=True)
    kind = Path(name).stem if name.endswith(".json") else name

    def check(message: dict[str, Any]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = compiled({field: message[field] for field in fields if field in message})
        except fastjsonschema.JsonSchemaValueException as exc:
            raise InvalidMessage(f"invalid {kind} request", cause=describe(exc)) from None
        return result

    return check


def describe(exc: fastjsonschema.JsonSchemaValueException) -> str:
    """`priority: data.priority must be smaller than or equal to 100`: field first, then rule."""
    path = ".".join(str(p) for p in (exc.path or [])[1:])
    return f"{path}: {exc.message}" if path else exc.message


@cache
def closeness(name: str) -> Score:
    """How close a message came to meaning this kind: (its fields the schema knows, required ones present)."""
    known = frozenset(definition(name).get("properties", ()))
    required = tuple(definition(name).get("required", ()))

    def score(message: dict[str, Any]) -> tuple[int, int]:
        return len(known.intersection(message)), sum(1 for field in required if field in message)

    return score


class Matcher(Generic[T]):
    """Routes in rank order, each a target (a plugin, a kind name) and the schema it accepts."""

    def __init__(self, routes: Sequence[tuple[T, str]]) -> None:
        self.routes = [(target, checker(name), closeness(name)) for target, name in routes]

    def match(self, message: Any) -> tuple[T, dict[str, Any]]:
        """The first route whose schema accepts `message`, and the message with its defaults.

        InvalidMessage(NO_SCHEMA) otherwise, its cause the closest schema's complaint."""
        if not isinstance(message, dict):
            raise InvalidMessage(NO_SCHEMA, cause="a request is a JSON object")
        errors: list[tuple[tuple[int, int], int, str]] = []
        for order, (target, check, score) in enumerate(self.routes):
            try:
                return target, check(message)
            except InvalidMessage as exc:
                errors.append((score(message), -order, exc.cause or exc.message))
        cause = max(errors)[2] if errors else "no request schema is enabled"
        raise InvalidMessage(NO_SCHEMA, cause=cause)


def _nested_defaults(schema: Any, depth: int = 0) -> bool:
    """Whether a `default` appears below the top-level properties (then a shallow copy is unsafe)."""
    if isinstance(schema, dict):
        if depth > 2 and "default" in schema:
            return True
        return any(_nested_defaults(v, depth + 1) for v in schema.values())
    if isinstance(schema, list):
        return any(_nested_defaults(v, depth + 1) for v in schema)
    return False
