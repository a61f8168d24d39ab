"""The quota check at the edge (kafka monitor, REST): over its quota, an app's request is refused
with an answer naming the quota, never queued and never dropped in silence.

Cost (the kafka monitor's ingest target is >= 20,000 requests/s): one round trip the first time an
app appears in a batch (its quota from the copy in `shoal:apps:quotas`, and its usage from
`shoal:apps:queued`, pipelined), then counting in memory. What a batch admitted is added to the
usage (HINCRBY, one pipeline) when the next batch begins, so the figure the next batch reads
includes it; the redis monitor sets the exact figure again every APPS_REFRESH_INTERVAL
(utils/apps/usage.py). A flood is thus refused within one batch per kafka monitor of its quota.
Redis unreadable: the request is admitted (its enqueue in the same batch fails and the batch is
retried; a quota never costs a request).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import redis

from utils.apps import mirror
from utils.config.clients import RedisClient
from utils.frontier import keys
from utils.observability.metrics import record_quota_refusals

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Which quota refused a request, its limit and what the app used when it was checked."""

    appid: str
    quota: str
    limit: int
    used: int

    @property
    def fields(self) -> dict[str, Any]:
        """The keys an answer adds: `status: refused`, `reason: quota` and which quota."""
        return {"status": "refused", "reason": "quota", "quota": self.quota, "limit": self.limit, "used": self.used}

    @property
    def cause(self) -> str:
        return f"{self.quota}: app {self.appid!r} has {self.used} requests queued, its quota is {self.limit}"


class QuotaGate:
    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self._seen: dict[str, tuple[int | None, int]] = {}  # app -> (its max_queued, its usage) read in this batch
        self._admitted: dict[str, int] = {}  # app -> requests admitted in this batch
        self._over: dict[str, Refusal] = {}  # app -> its refusal, once over its quota in this batch
        self._refused: dict[tuple[str, str], int] = {}  # (app, quota) -> refused in this batch

    def new_batch(self) -> None:
        """Add what the last batch admitted to the shared figure; forget what was read."""
        admitted, self._admitted, self._seen, self._over = self._admitted, {}, {}, {}
        for (appid, quota), n in self._refused.items():
            record_quota_refusals(appid, quota, n)
        self._refused = {}
        if not admitted:
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for appid, n in admitted.items():
                pipe.hincrby(keys.APPS_QUEUED, appid, n)
            pipe.execute()
        except redis.RedisError as exc:  # the redis monitor's next refresh counts them anyway
            log.warning("Admitted requests not added to the app figures", extra={"error": str(exc)})

    def admit(self, appid: str) -> Refusal | None:
        """None and the request counted, or the quota it is over (the request must not be queued)."""
        refusal = self.over(appid)
        if refusal is not None:
            self.refuse(refusal)
            return refusal
        self._admitted[appid] = self._admitted.get(appid, 0) + 1
        return None

    def over(self, appid: str) -> Refusal | None:
        """The quota the app is over in this batch, counting nothing. Once over, an app stays over
        until the batch ends (nothing more of it is admitted): a flood costs a dict lookup per request."""
        refusal = self._over.get(appid)
        if refusal is not None:
            return refusal
        seen = self._seen.get(appid)
        if seen is None:
            seen = self._seen[appid] = self._read(appid)
        limit, used = seen
        if limit is None:
            return None
        used += self._admitted.get(appid, 0)
        if used < limit:
            return None
        refusal = self._over[appid] = Refusal(appid, "max_queued", limit, used)
        return refusal

    def refuse(self, refusal: Refusal) -> None:
        """Count one request refused (the batch's figure goes to the metrics when the next begins)."""
        key = (refusal.appid, refusal.quota)
        self._refused[key] = self._refused.get(key, 0) + 1

    def check(self, appid: str) -> Refusal | None:
        """The quota the app is over now, if any, counting nothing (the REST gateway's early answer)."""
        limit, used = self._read(appid)
        if limit is None or used < limit:
            return None
        record_quota_refusals(appid, "max_queued")
        return Refusal(appid, "max_queued", limit, used)

    def _read(self, appid: str) -> tuple[int | None, int]:
        """(max_queued, usage) in one round trip; (None, 0) when Redis does not answer."""
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.hmget(keys.APPS_QUOTAS, [appid, mirror.DEFAULT_FIELD])
            pipe.hget(keys.APPS_QUEUED, appid)
            (own, default), used = pipe.execute()
        except redis.RedisError as exc:
            log.warning("App quota unreadable; request admitted", extra={"appid": appid, "error": str(exc)})
            return None, 0
        quota = mirror.entry(own) if own is not None else mirror.entry(default)
        try:
            return quota.max_queued, int(used or 0)
        except ValueError:
            return quota.max_queued, 0
