"""The YAML domain config in ZooKeeper (Scrapy Cluster's format), parsed and validated.

    blacklist: [ebay.com]
    domains:
      dmoztools.net: {window: 60, hits: 60, scale: 1.0}

A domain entry counts only with both `window` and `hits` (as Scrapy Cluster); `scale` in [0, 1]
multiplies hits.
"""

from __future__ import annotations

import logging
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


def _limits(domains: dict[str, Any]) -> dict[str, DomainLimit]:
    limits = {}
    for domain, entry in domains.items():
        if isinstance(entry, dict) and entry.get("hits") and entry.get("window"):
            limits[domain] = DomainLimit(int(entry["hits"]), float(entry["window"]), float(entry.get("scale", 1.0)))
    return limits
