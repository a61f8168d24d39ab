"""The proxy pool's state in Redis, shared by every spider process of the cluster.

Per proxy and per domain: requests, successes, bans and the end of a quarantine. Bans go through
one Lua script (utils/proxies/lua/proxy_ban.lua) so that two spiders banning the same proxy at once count
one strike. Proxies are named by a credential-free label everywhere (Redis, logs, stats, answers).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from utils.config.address_policy import proxy_list_urls
from utils.config.settings import Settings
from utils.frontier.scripts import source
from utils.proxies import keys as proxy_keys


@dataclass(frozen=True)
class Proxy:
    url: str  # as configured, credentials included: only ever handed to the downloader
    label: str  # scheme://host:port

    @classmethod
    def parse(cls, url: str) -> Proxy:
        return cls(url, redact(url))


def redact(url: str) -> str:
    """`scheme://host:port` of a proxy URL: user and password dropped."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme or 'http'}://{host}{port}"


def parse_proxy_list(value: str) -> list[Proxy]:
    """PROXY_LIST: comma-separated URLs, or `@path` to a file with one per line ('#' comments)."""
    proxies = [Proxy.parse(item) for item in proxy_list_urls(value)]
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
        return [_describe(proxy.label, values[2 * i], values[2 * i + 1], now) for i, proxy in enumerate(self.proxies)]


def _describe(label: str, raw: dict[Any, Any], quarantined: list[Any], now: float) -> dict[str, Any]:
    fields = {_text(k): _text(v) for k, v in raw.items()}
    until = float(fields.get("until", 0) or 0)
    return {
        "proxy": label,
        "requests": int(fields.get("requests", 0)),
        "successes": int(fields.get("successes", 0)),
        "bans": int(fields.get("bans", 0)),
        "retries": int(fields.get("retries", 0)),  # immediate retries through another proxy after its bans
        "quarantined_until": until if until > now else None,
        "quarantined_domains": {_text(domain): float(ends) for domain, ends in quarantined},
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
