"""The quota check at the edge (kafka monitor, REST): over its quota, an app's request is refused
with an answer naming the quota, never queued and never dropped in silence.

Cost (the kafka monitor's ingest target is >= 20,000 requests/s): nothing for an app without a
quota; for an app with one, one HGET of `shoal:apps:queued` the first time it appears in a batch,
then counting in memory. What a batch admitted is added to that hash (HINCRBY, one pipeline) when
the next batch begins, so the figure the next batch reads includes it; the redis monitor sets the
exact figure again every APPS_REFRESH_INTERVAL (utils/apps/usage.py). A flood is thus refused
within one batch per kafka monitor of its quota. Redis unreadable: the request is admitted (its
enqueue in the same batch fails and the batch is retried; a quota never loses a request).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import redis

from utils.apps.watch import QuotaWatcher
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
    def __init__(self, client: RedisClient, watcher: QuotaWatcher) -> None:
        self.client = client
        self.watcher = watcher
        self._used: dict[str, int] = {}  # app -> its figure read in this batch
        self._admitted: dict[str, int] = {}  # app -> requests admitted in this batch
        self._refused: dict[tuple[str, str], int] = {}  # (app, quota) -> refused in this batch

    def new_batch(self) -> None:
        """Add what the last batch admitted to the shared figure; forget the figures read."""
        admitted, self._admitted, self._used = self._admitted, {}, {}
        for (appid, quota), n in self._refused.items():
            record_quota_refusals(appid, quota, n)
        self._refused = {}
        if not any(admitted.values()):
            return
        try:
            pipe = self.client.pipeline(transaction=False)
            for appid, n in admitted.items():
                if n:
                    pipe.hincrby(keys.APPS_QUEUED, appid, n)
            pipe.execute()
        except redis.RedisError as exc:  # the redis monitor's next refresh counts them anyway
            log.warning("Admitted requests not added to the app figures", extra={"error": str(exc)})

    def admit(self, appid: str) -> Refusal | None:
        """None and the request counted, or the quota it is over (the request must not be queued)."""
        limit = self.watcher.current.of(appid).max_queued
        if limit is None:
            return None
        if appid not in self._used:
            self._used[appid] = self._read(appid)
        admitted = self._admitted.get(appid, 0)
        used = self._used[appid] + admitted
        if used >= limit:
            self._refused[(appid, "max_queued")] = self._refused.get((appid, "max_queued"), 0) + 1
            return Refusal(appid, "max_queued", limit, used)
        self._admitted[appid] = admitted + 1
        return None

    def check(self, appid: str) -> Refusal | None:
        """The quota the app is over now, if any, counting nothing (the REST gateway's early answer)."""
        limit = self.watcher.current.of(appid).max_queued
        if limit is None:
            return None
        used = self._read(appid)
        if used < limit:
            return None
        record_quota_refusals(appid, "max_queued")
        return Refusal(appid, "max_queued", limit, used)

    def _read(self, appid: str) -> int:
        try:
            value = self.client.hget(keys.APPS_QUEUED, appid)
        except redis.RedisError as exc:
            log.warning("App figure unreadable; request admitted", extra={"appid": appid, "error": str(exc)})
            return 0
        try:
            return int(value or 0)
        except ValueError:
            return 0
