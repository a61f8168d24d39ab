"""The YAML domain config in ZooKeeper (Scrapy Cluster's format), parsed and validated.

    blacklist: [ebay.com]
    domains:
      dmoztools.net: {window: 60, hits: 60, scale: 1.0}

A domain entry counts only with both `window` and `hits` (as Scrapy Cluster); `scale` in [0, 1]
multiplies hits.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DomainLimit:
    hits: int
    window: float
    scale: float = 1.0

    @property
    def effective_hits(self) -> int:
        return max(int(self.hits * min(max(self.scale, 0.0), 1.0)), 0)


@dataclass(frozen=True)
class DomainConfig:
    domains: dict[str, DomainLimit] = field(default_factory=dict)
    blacklist: frozenset[str] = frozenset()
    extra: dict[str, Any] = field(default_factory=dict)  # per-domain keys Shoal does not throttle on

    @classmethod
    def parse(cls, text: str | bytes | None) -> DomainConfig:
        """An empty or missing node is an empty config; malformed YAML raises ValueError."""
        if not text:
            return cls()
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"domain config is not YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError("domain config must be a mapping")
        return cls(
            _limits(data.get("domains") or {}),
            frozenset(data.get("blacklist") or []),
            {d: v for d, v in (data.get("domains") or {}).items() if isinstance(v, dict)},
        )


def _limits(domains: Any) -> dict[str, DomainLimit]:
    """Each entry with hits and window; a number that is not finite, or out of range, refuses the config.

    A NaN or infinite `hits`, `window` or `scale` (YAML `.nan`, `.inf`) used to raise deep in the
    throttle, and an exception in the watch callback ended the watch: every later update was ignored.
    """
    if not isinstance(domains, dict):
        raise ValueError("domain config: domains must be a mapping")
    limits = {}
    for domain, entry in domains.items():
        if isinstance(entry, dict) and entry.get("hits") and entry.get("window"):
            hits = _number(domain, "hits", entry["hits"], 1)
            window = _number(domain, "window", entry["window"], 1e-3)
            scale = _number(domain, "scale", entry.get("scale", 1.0), 0.0, 1.0)
            limits[str(domain)] = DomainLimit(int(hits), window, scale)
    return limits


def _number(domain: Any, name: str, value: Any, low: float, high: float = 1e12) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"domain config: {domain}.{name} is not a number: {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"domain config: {domain}.{name} is not a number: {value!r}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"domain config: {domain}.{name} must be a finite number in [{low}, {high}], not {value!r}")
    return number
