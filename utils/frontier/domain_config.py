"""The YAML domain config in ZooKeeper (Scrapy Cluster's format), parsed and validated.

    blacklist: [ebay.com]
    domains:
      dmoztools.net: {window: 60, hits: 60, scale: 1.0}
    shop.test: {proxy_labels: {type: residential}}

A domain entry counts only with both `window` and `hits` (as Scrapy Cluster); `scale` in [0, 1]
multiplies hits. Domains and blacklist entries are read as queue domains (utils/frontier/domains.py),
so `EBAY.com`, `ebay.com.` and `www.ebay.com` all name `ebay.com`, `0x7f.1` names `127.0.0.1`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from utils.config.proxy_labels import Labels, asked_labels
from utils.frontier.block_config import DomainBlocks, parse_blocks
from utils.frontier.domains import host_domain

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
    blocks: dict[str, DomainBlocks] = field(default_factory=dict)  # per-domain `blocks` (issue 33)
    proxies: dict[str, Labels] = field(default_factory=dict)  # per-domain `proxy_labels` of its pool proxies

    def revisit(self, domain: str) -> dict[str, Any] | None:
        """The domain's `revisit` policy values (issue 31: `domains: {shop.example: {revisit: {max: 3600}}}`)."""
        entry = self.extra.get(host_domain(domain)) or {}
        policy = entry.get("revisit")
        return policy if isinstance(policy, dict) else None

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
        domains = data.get("domains") or {}
        extra = {host_domain(str(d)): v for d, v in domains.items() if isinstance(v, dict)} \
            if isinstance(domains, dict) else {}  # fmt: skip
        blocks = {d: parse_blocks(d, v["blocks"]) for d, v in extra.items() if v.get("blocks") is not None}
        return cls(_limits(domains), _blacklist(data.get("blacklist")), extra, blocks, _proxy_labels(extra))

    def domain_blocks(self, domain: str) -> DomainBlocks | None:
        """The domain's block markers and ladder rules from its `blocks` entry (issue 33), if any."""
        return self.blocks.get(host_domain(domain))

    def proxy_labels(self, domain: str) -> Labels:
        """The labels the domain's pool proxies must have (`proxy_labels: {type: residential}`); () = none."""
        return self.proxies.get(host_domain(domain), ()) if self.proxies else ()  # most configs ask for none


def _proxy_labels(extra: dict[str, Any]) -> dict[str, Labels]:
    """Each entry's `proxy_labels` (a mapping or `key=value,...`); a malformed one refuses the config."""
    found = {}
    for domain, entry in extra.items():
        try:
            labels = asked_labels(entry.get("proxy_labels"))
        except ValueError as exc:
            raise ValueError(f"domain config: {domain}.{exc}" if str(exc).startswith("proxy_labels")
                             else f"domain config: {domain}.proxy_labels: {exc}") from None  # fmt: skip
        if labels:
            found[domain] = labels
    return found


def _blacklist(entries: Any) -> frozenset[str]:
    """Each entry as the queue domain of that host (`EBAY.com.` -> `ebay.com`, `0x7f.1` -> `127.0.0.1`);
    one string is one entry (YAML `blacklist: ebay.com`), not a set of its characters."""
    if entries is None:
        return frozenset()
    if isinstance(entries, str | int | float):
        entries = [entries]
    if not isinstance(entries, list) or not all(isinstance(e, str | int | float) for e in entries):
        raise ValueError(f"domain config: blacklist must be a list of domains, not {entries!r}")
    return frozenset(host_domain(str(entry)) for entry in entries if str(entry).strip())


def _limits(domains: Any) -> dict[str, DomainLimit]:
    """Each entry with hits and window; a number that is not finite, or out of range, refuses the config.

    A NaN or infinite `hits`, `window` or `scale` (YAML `.nan`, `.inf`) used to raise deep in the
    throttle, and an exception in the watch callback ended the watch: every later update was ignored.
    """
    if not isinstance(domains, dict):
        raise ValueError("domain config: domains must be a mapping")
    limits: dict[str, DomainLimit] = {}
    for domain, entry in domains.items():
        if isinstance(entry, dict) and entry.get("hits") and entry.get("window"):
            hits = _number(domain, "hits", entry["hits"], 1)
            window = _number(domain, "window", entry["window"], 1e-3)
            scale = _number(domain, "scale", entry.get("scale", 1.0), 0.0, 1.0)
            limit, key = DomainLimit(int(hits), window, scale), host_domain(str(domain))
            if key not in limits or _rate(limit) < _rate(limits[key]):  # two spellings of one domain: the stricter
                limits[key] = limit
    return limits


def _rate(limit: DomainLimit) -> float:
    return limit.effective_hits / limit.window


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
