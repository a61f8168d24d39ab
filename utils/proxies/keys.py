"""Every Redis key of the proxy pool, as one function each (utils/proxies/lua/proxy_ban.lua builds the same).

A proxy is named by its label, `scheme://host:port`: the credentials of its URL never reach Redis.
Every key carries the idle TTL PROXY_STATE_TTL, refreshed on each write. The label is each key's
hash tag (`shoal:proxy:{<label>}...`), so one proxy's keys share a Redis Cluster slot.
"""

from __future__ import annotations

PREFIX = "shoal:proxy:"


def proxy_state(label: str) -> str:
    """HASH of one proxy: requests, successes, bans, until (unix s of its quarantine for every domain)."""
    return f"{PREFIX}{{{label}}}"


def proxy_domain(label: str, domain: str) -> str:
    """HASH of one proxy for one domain: requests, successes, bans, strikes, until (quarantine end)."""
    return f"{PREFIX}{{{label}}}:domain:{domain}"


def proxy_quarantines(label: str) -> str:
    """ZSET domain -> quarantine end (unix s) of the domains a proxy is banned for."""
    return f"{PREFIX}{{{label}}}:quarantined"
