"""The quotas in force, copied from ZooKeeper into Redis (`shoal:apps:quotas`) by the redis monitors.

The edge (kafka monitors, REST gateways) reads an app's quota together with its usage in one round
trip, and needs no ZooKeeper session of its own. The copy is written when the watch fires and again
at every refresh (APPS_REFRESH_INTERVAL), fields first and stale fields removed after, so a reader
never sees the quotas missing.
"""

from __future__ import annotations

from collections.abc import Iterable

import ujson

from utils.apps.quotas import AppQuota, Quotas, parse_entry
from utils.config.clients import RedisClient
from utils.frontier import keys

DEFAULT_FIELD = "\tdefault"  # the default entry: no appid holds a tab


def write(client: RedisClient, quotas: Quotas) -> None:
    fields = {app: ujson.dumps(q.as_dict()) for app, q in quotas.apps.items()}
    fields[DEFAULT_FIELD] = ujson.dumps(quotas.default.as_dict())
    stale = {_text(f) for f in client.hkeys(keys.APPS_QUOTAS)} - set(fields)
    pipe = client.pipeline(transaction=False)
    pipe.hset(keys.APPS_QUOTAS, mapping=fields)
    if stale:
        pipe.hdel(keys.APPS_QUOTAS, *stale)
    pipe.execute()


def read(client: RedisClient, appids: Iterable[str] | None = None) -> Quotas:
    """The copy: every app's entry, or only those of `appids` (with the default either way)."""
    if appids is None:
        raw = {_text(k): v for k, v in client.hgetall(keys.APPS_QUOTAS).items()}
    else:
        wanted = [*appids, DEFAULT_FIELD]
        raw = dict(zip(wanted, client.hmget(keys.APPS_QUOTAS, wanted), strict=True))
    default = entry(raw.pop(DEFAULT_FIELD, None))
    return Quotas({app: entry(value) for app, value in raw.items() if value is not None}, default)


def entry(value: str | bytes | None) -> AppQuota:
    """One field's quota; unreadable is none (the copy is rewritten at the next refresh)."""
    if value is None:
        return AppQuota()
    try:
        return parse_entry("copy", ujson.loads(value))
    except ValueError:
        return AppQuota()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
