"""Proxy labels: the kind and place of a proxy (`region=de`, `type=residential`) and what a request asks for.

A PROXY_LIST entry carries its labels after `#` (`http://127.0.0.1:8888#region=de,type=residential`).
A request asks for labels (its crawl's `proxy_labels`, over its domain's `proxy_labels` in the
ZooKeeper config); its group is every proxy that has each label asked for. A request that asks for
none belongs to the default group: the entries without labels.
"""

from __future__ import annotations

import re
from typing import Any

Labels = tuple[tuple[str, str], ...]  # sorted (key, value) pairs: hashable, one spelling per set

DEFAULT_GROUP = "default"  # the name of the group of entries without labels (metrics, CLI, dashboard)
_WORD = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
PIECE = re.compile(r"^[A-Za-z0-9_.-]{1,64}=[A-Za-z0-9_.-]{1,64}$")  # one `key=value` label


def parse_labels(text: str) -> Labels:
    """`region=de,type=residential` (commas or semicolons) as sorted pairs; ValueError names a bad piece."""
    pairs: dict[str, str] = {}
    for piece in re.split(r"[,;]", text):
        piece = piece.strip()
        if not piece:
            continue
        if not PIECE.match(piece):
            raise ValueError(f"proxy label {piece[:80]!r} is not key=value (letters, digits, '_', '.', '-')")
        key, value = piece.split("=", 1)
        pairs[key] = value
    return tuple(sorted(pairs.items()))


def asked_labels(value: Any) -> Labels:
    """The labels a request or a domain entry asks for: a mapping, or a `key=value,...` string.

    ValueError when it is neither, or a key or value is not a plain word."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return parse_labels(value)
    if not isinstance(value, dict):
        raise ValueError(f"proxy_labels must be a mapping of label to value, not {type(value).__name__}")
    pairs = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ValueError(f"proxy_labels.{key}: a label's value is a word, not {item!r}")
        if not _WORD.match(str(key)) or not _WORD.match(str(item)):
            raise ValueError(f"proxy label {key}={item} is not key=value (letters, digits, '_', '.', '-')")
        pairs[str(key)] = str(item)
    return tuple(sorted(pairs.items()))


def merged(domain: Labels, request: Labels) -> Labels:
    """The domain's labels with the request's over them, key by key (a price in `de` of a hard site
    asks for `region=de` and keeps the domain's `type=residential`)."""
    if not domain or not request:
        return request or domain
    return tuple(sorted({**dict(domain), **dict(request)}.items()))


def matches(has: Labels, asked: Labels) -> bool:
    """Whether a proxy with labels `has` serves a request that asks for `asked`."""
    return set(asked) <= set(has) if asked else not has


def group_name(labels: Labels) -> str:
    """`region=de,type=residential`, or `default` for no labels."""
    return ",".join(f"{key}={value}" for key, value in labels) or DEFAULT_GROUP
