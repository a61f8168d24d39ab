"""The proxy pool's state in Redis, shared by every spider process of the cluster.

Per proxy and per domain: requests, successes, bans and the end of a quarantine. Bans go through
one Lua script (utils/proxies/lua/proxy_ban.lua) so that two spiders banning the same proxy at once count
one strike. Proxies are named by a credential-free label everywhere (Redis, logs, stats, answers).
Entries carry labels of their kind and place (utils/config/proxy_labels.py); a request is served by the
group of proxies that has the labels it asks for.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from utils.config.address_policy import proxy_list_entries
from utils.config.proxy_labels import Labels, group_name, matches, parse_labels
from utils.config.settings import Settings
from utils.frontier.scripts import source
from utils.proxies import keys as proxy_keys


@dataclass(frozen=True)
class Proxy:
    url: str  # as configured, credentials included: only ever handed to the downloader
    label: str  # scheme://host:port
    labels: Labels = ()  # its kind and place, from `#key=value,...` after the URL

    @classmethod
    def parse(cls, entry: str) -> Proxy:
        """A PROXY_LIST entry, `url` or `url#key=value,...`; ValueError names a malformed label."""
        url, _, labels = entry.partition("#")
        url = url.strip()
        try:
            return cls(url, redact(url), parse_labels(labels))
        except ValueError as exc:
            raise ValueError(f"PROXY_LIST entry {redact(url)}: {exc}") from None

    @property
    def group(self) -> str:
        return group_name(self.labels)


def redact(url: str) -> str:
    """`scheme://host:port` of a proxy URL: user and password dropped."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme or 'http'}://{host}{port}"


def parse_proxy_list(value: str) -> list[Proxy]:
    """PROXY_LIST: comma-separated entries, or `@path` to a file with one per line (comments after ' #')."""
    proxies = [Proxy.parse(item) for item in proxy_list_entries(value)]
    return list({proxy.label: proxy for proxy in proxies}.values())  # one entry per label


@dataclass(frozen=True)
class Ban:
    """The quarantine ends a ban caused (unix s); `everywhere` is 0 unless the proxy went global."""

    domain_until: float
    everywhere: float

    @property
    def until(self) -> float:
        return max(self.domain_until, self.everywhere)


class ProxyPool:
    def __init__(
        self, client: Any, proxies: list[Proxy], cooldown: float, cooldown_max: float, global_domains: int, ttl: int
    ) -> None:
        self.client = client
        self.proxies = proxies
        self.cooldown, self.cooldown_max, self.global_domains, self.ttl = cooldown, cooldown_max, global_domains, ttl
        self._ban = client.register_script(source("proxy_ban", "utils.proxies"))
        self._groups: dict[Labels, list[str]] = {}

    def group(self, asked: Labels) -> list[str]:
        """The labels (names) of the proxies that serve a request asking for `asked`, in list order."""
        found = self._groups.get(asked)
        if found is None:
            found = self._groups[asked] = [proxy.label for proxy in self.proxies if matches(proxy.labels, asked)]
        return found

    @classmethod
    def from_settings(cls, settings: Settings, client: Any) -> ProxyPool:
        return cls(
            client,
            parse_proxy_list(settings.get_str("PROXY_LIST")),
            settings.get_float("PROXY_COOLDOWN"),
            settings.get_float("PROXY_COOLDOWN_MAX"),
            settings.get_int("PROXY_GLOBAL_BAN_DOMAINS"),
            settings.get_int("PROXY_STATE_TTL"),
        )

    def quarantines(self, domain: str) -> dict[str, float]:
        """label -> end of its quarantine for `domain` (unix s; 0 = healthy), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for proxy in self.proxies:
            pipe.zscore(proxy_keys.proxy_quarantines(proxy.label), domain)
            pipe.hget(proxy_keys.proxy_state(proxy.label), "until")
        values = pipe.execute()
        return {
            proxy.label: max(float(values[2 * i] or 0), float(values[2 * i + 1] or 0))
            for i, proxy in enumerate(self.proxies)
        }

    def ban(self, label: str, domain: str) -> Ban:
        args = [label, domain, self.cooldown, self.cooldown_max, self.global_domains, self.ttl]
        ends, everywhere = self._ban(keys=[proxy_keys.proxy_state(label)], args=args)
        return Ban(float(ends), float(everywhere))

    def count(self, counts: Counter[tuple[str, str, str]]) -> None:
        """Add (label, domain, field) -> n to the proxy's and the proxy-domain's counters."""
        if not counts:
            return
        pipe = self.client.pipeline(transaction=False)
        for (label, domain, name), n in counts.items():
            for key in (proxy_keys.proxy_state(label), proxy_keys.proxy_domain(label, domain)):
                pipe.hincrby(key, name, n)
                pipe.expire(key, self.ttl)
        pipe.execute()

    def state(self, now: float | None = None) -> list[dict[str, Any]]:
        """Per proxy: its counters, its global quarantine and the domains it is quarantined for."""
        now = time.time() if now is None else now
        pipe = self.client.pipeline(transaction=False)
        for proxy in self.proxies:
            pipe.hgetall(proxy_keys.proxy_state(proxy.label))
            pipe.zrangebyscore(proxy_keys.proxy_quarantines(proxy.label), now, "+inf", withscores=True)
        values = pipe.execute()
        return [_describe(proxy, values[2 * i], values[2 * i + 1], now) for i, proxy in enumerate(self.proxies)]


GROUP_FIELDS = ("requests", "successes", "bans", "retries")


def group_health(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group of `state()` rows (one label set each): its proxies, how many are healthy (not
    quarantined everywhere), domain quarantines and the summed counters, in PROXY_LIST order."""
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(row["group"], {"group": row["group"], "labels": row["labels"], "proxies": 0,
                                                 "healthy": 0, "quarantined_domains": 0,
                                                 **dict.fromkeys(GROUP_FIELDS, 0)})  # fmt: skip
        group["proxies"] += 1
        group["healthy"] += 0 if row["quarantined_until"] else 1
        group["quarantined_domains"] += len(row["quarantined_domains"])
        for name in GROUP_FIELDS:
            group[name] += row[name]
    return list(groups.values())


def _describe(proxy: Proxy, raw: dict[Any, Any], quarantined: list[Any], now: float) -> dict[str, Any]:
    fields = {_text(k): _text(v) for k, v in raw.items()}
    until = float(fields.get("until", 0) or 0)
    return {
        "proxy": proxy.label,
        "labels": dict(proxy.labels),
        "group": proxy.group,
        "requests": int(fields.get("requests", 0)),
        "successes": int(fields.get("successes", 0)),
        "bans": int(fields.get("bans", 0)),
        "retries": int(fields.get("retries", 0)),  # immediate retries through another proxy after its bans
        "quarantined_until": until if until > now else None,
        "quarantined_domains": {_text(domain): float(ends) for domain, ends in quarantined},
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
