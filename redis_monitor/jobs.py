"""The redis monitors' side of the jobs stream: read, take over, retry, acknowledge.

Jobs (utils/jobs/stream.py) are entries of `shoal:jobs`, read by the consumer group `redis-monitors`,
so each goes to one monitor and stays pending until that monitor acknowledges it. A pending job
comes back (XCLAIM, which counts a delivery) when its monitor failed on it (after a retry delay
that doubles per attempt) or when the monitor that holds it went silent (REDIS_MONITOR_CLAIM_IDLE:
it died). The delivery count is therefore the number of attempts (reference §8: RETRY_FAILURES_MAX).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import redis

from utils.config.clients import RedisClient
from utils.frontier import keys
from utils.jobs.stream import Job
from utils.schemas import wire

log = logging.getLogger(__name__)

PENDING_SCAN = 100  # pending entries looked at per reclaim
CONSUMER_IDLE_PRUNE = 3600.0  # seconds; a consumer silent this long with nothing pending is removed


class JobStream:
    def __init__(
        self,
        client: RedisClient,
        consumer: str,
        claim_idle: float,
        retry_delay: float,
        clock: Callable[[], float],
    ) -> None:
        self.client = client
        self.consumer = consumer
        self.claim_idle_ms = int(claim_idle * 1000)
        self.retry_delay_ms = max(int(retry_delay * 1000), 1)
        self.clock = clock
        self.bad: list[tuple[str, dict[str, Any]]] = []  # unreadable entries, for the caller to report
        self._group_ready = False
        self._last_prune = clock()
        self._waiting: list[Job] = []  # read by `wait`, handed out by the next `read`

    def ensure_group(self) -> None:
        """Create the group (and the stream) when missing; from 0, so earlier jobs are done too."""
        if self._group_ready:
            return
        try:
            self.client.xgroup_create(keys.JOBS, keys.JOBS_GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def wait(self, block_ms: int) -> None:
        """Block until a new job arrives or `block_ms` passed (an idle monitor's sleep)."""
        if not self._waiting:
            self._waiting = self.read(1, block_ms)

    def read(self, count: int, block_ms: int | None = None) -> list[Job]:
        """New jobs for this monitor (at most `count`; waits up to `block_ms` when there is none)."""
        if self._waiting:
            taken, self._waiting = self._waiting, []
            return taken + self.read(count - len(taken))
        if count <= 0:
            return []
        self.ensure_group()
        try:
            reply = self.client.xreadgroup(
                keys.JOBS_GROUP, self.consumer, {keys.JOBS: ">"}, count=count, block=block_ms
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._group_ready = False  # the stream was deleted: make it again next time
            return []
        entries = [entry for _stream, items in reply or [] for entry in items]
        return self._jobs(entries, {})

    def reclaim(self, count: int, exclude: Iterable[str] = ()) -> list[Job]:
        """Pending jobs due again: this monitor's failed ones, and those of silent monitors."""
        self.ensure_group()
        skip = set(exclude)
        pending = self.client.xpending_range(
            keys.JOBS, keys.JOBS_GROUP, "-", "+", PENDING_SCAN, idle=self.retry_delay_ms
        )
        mine: dict[str, int] = {}  # entry id -> its delivery number once claimed
        theirs: dict[str, int] = {}
        for entry in pending:
            entry_id, deliveries = _text(entry["message_id"]), int(entry["times_delivered"])
            if entry_id in skip or len(mine) + len(theirs) >= count:
                continue
            if _text(entry["consumer"]) == self.consumer:
                if entry["time_since_delivered"] >= self.retry_delay_ms * 2 ** (deliveries - 1):
                    mine[entry_id] = deliveries + 1
            elif entry["time_since_delivered"] >= self.claim_idle_ms:
                theirs[entry_id] = deliveries + 1
        jobs = self._claim(mine, self.retry_delay_ms) + self._claim(theirs, self.claim_idle_ms)
        if theirs:
            log.warning("Took over jobs of a silent redis monitor", extra={"jobs": sorted(theirs)})
        return jobs

    def _claim(self, due: dict[str, int], min_idle_ms: int) -> list[Job]:
        """XCLAIM re-checks the idle time, so of two monitors claiming one job only one gets it."""
        if not due:
            return []
        claimed = self.client.xclaim(keys.JOBS, keys.JOBS_GROUP, self.consumer, min_idle_ms, list(due))
        return self._jobs([entry for entry in claimed if entry and entry[1]], due)

    def keep(self, entry_ids: Iterable[str]) -> None:
        """Reset the idle time of jobs still in hand (answers not yet confirmed), not their count."""
        ids = list(entry_ids)
        if ids:
            self.client.xclaim(keys.JOBS, keys.JOBS_GROUP, self.consumer, 0, ids, justid=True)

    def done(self, entry_ids: Iterable[str]) -> None:
        """Acknowledge and delete answered jobs."""
        ids = list(entry_ids)
        if not ids:
            return
        pipe = self.client.pipeline(transaction=False)
        pipe.xack(keys.JOBS, keys.JOBS_GROUP, *ids)
        pipe.xdel(keys.JOBS, *ids)
        pipe.execute()

    def prune_consumers(self) -> int:
        """Remove consumers of monitors long gone (hourly); each restart adds a consumer name."""
        if self.clock() - self._last_prune < CONSUMER_IDLE_PRUNE / 4:
            return 0
        self._last_prune = self.clock()
        removed = 0
        for consumer in self.client.xinfo_consumers(keys.JOBS, keys.JOBS_GROUP):
            name = _text(consumer["name"])
            if consumer["pending"] == 0 and consumer["idle"] > CONSUMER_IDLE_PRUNE * 1000 and name != self.consumer:
                self.client.xgroup_delconsumer(keys.JOBS, keys.JOBS_GROUP, name)
                removed += 1
        return removed

    def _jobs(self, entries: list[Any], deliveries: dict[str, int]) -> list[Job]:
        """Entries -> jobs; an entry that is no job (a field missing, a request that is not a JSON object
        or holds what no message may, issue 30) goes to `bad`, never raises."""
        jobs = []
        for entry_id, fields in entries:
            entry_id = _text(entry_id)
            try:
                job = Job.from_entry(entry_id, fields, deliveries.get(entry_id, 1))
                reason = wire.refusal(job.request) if isinstance(job.request, dict) else "request: not a JSON object"
                if reason is not None:
                    raise ValueError(reason)
                jobs.append(job)
            except Exception as exc:
                log.error("Unreadable job entry", extra={"entry_id": entry_id, "error": repr(exc)[:500]})
                self.bad.append((entry_id, {_text(k): _text(v) for k, v in fields.items()}))
        return jobs


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
