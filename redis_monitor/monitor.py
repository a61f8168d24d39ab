"""The redis monitor's loop: take jobs, let the plugins answer them, run the periodic plugins.

One round (`run_once`): acknowledge jobs whose answers Kafka confirmed, take due pending jobs
(failed ones, and those of silent monitors) and new ones, hand each to the first plugin (by rank)
that accepts it, run every periodic plugin, send, then heartbeat, flush stats and dump them.
A job that raises is retried (REDIS_MONITOR_RETRY_DELAY, doubling) and after RETRY_FAILURES_MAX
attempts answered with an error and dead-lettered; the monitor never dies of a job. A job whose
request its kind's schema refuses is answered and dead-lettered at once. `_handle` is the one
boundary of a job: whatever the job does, only Redis being unavailable leaves it (issue 30: a job
that raised outside the plugin's call failed the round again and again). While Redis is down,
`run` backs off and tries again; jobs stay pending in the stream meanwhile.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import redis

from redis_monitor.context import Context
from redis_monitor.dumps import StatsDumper
from redis_monitor.jobs import JobStream
from redis_monitor.outbox import Outbox
from redis_monitor.plugins.base import Every
from utils.config.clients import ensure_topics, kafka_producer, redis_client
from utils.config.errors import InvalidMessage, last_line
from utils.config.plugins import load_plugins
from utils.config.settings import Settings
from utils.frontier import keys
from utils.jobs.stream import Job
from utils.observability.metrics import mark_loop, record_dead_letter, record_job, set_dependency_up
from utils.observability.stats import StatsCollector, StatsConfig, beat
from utils.schemas import answers
from utils.schemas.matching import NO_SCHEMA, checker, definition

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0  # seconds between heartbeats (their TTL is HEARTBEAT_TIMEOUT)
MAX_BACKOFF = 10.0  # seconds between attempts while Redis is down
SEND_WAIT = 10.0  # seconds a round waits for Kafka to confirm its answers (kept for later if not)
RETRIABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)
SCHEMAS = {"action": "action", "stats": "stats", "zookeeper": "zookeeper"}  # job kind -> its request schema
STAMPS = ("ts",)  # fields the kafka monitor adds to a validated request (not in its schema)
_ACTIONS = frozenset(definition("action")["properties"]["action"]["enum"])


class RedisMonitor:
    def __init__(self, context: Context, jobs: JobStream, plugins: list[Any], dumper: StatsDumper) -> None:
        self.context = context
        self.settings = context.settings
        self.redis = context.redis
        self.jobs = jobs
        self.plugins = plugins
        self.job_plugins = [p for p in plugins if hasattr(p, "handle")]
        self.periodic = [p for p in plugins if hasattr(p, "run_once")]
        self.dumper = dumper
        self.max_attempts = self.settings.get_int("RETRY_FAILURES_MAX")
        clock = context.clock
        self.heartbeat_every = Every(HEARTBEAT_EVERY, clock)
        self.flush_every = Every(self.settings.get_float("STATS_CYCLE"), clock)
        self.reclaim_every = Every(jobs.retry_delay_ms / 2000, clock)  # a failed job is retried on time

    @classmethod
    def from_settings(cls, settings: Settings, clock: Callable[[], float] = time.time) -> RedisMonitor:
        topics = [settings.topic(s) for s in ("outbound_firehose", "dead_letter", "crawled_firehose")]
        ensure_topics(settings, topics)
        client = redis_client(settings, decode=True)
        stats_config = StatsConfig.from_settings(settings)
        context = Context(
            settings=settings,
            redis=client,
            outbox=Outbox(kafka_producer(settings), settings),
            stats=StatsCollector(client, stats_config, clock),
            host=socket.gethostname(),
            process_id=uuid.uuid4().hex[:12],
            clock=clock,
        )
        jobs = JobStream(
            client,
            f"{context.host}:{context.process_id}",
            settings.get_float("REDIS_MONITOR_CLAIM_IDLE"),
            settings.get_float("REDIS_MONITOR_RETRY_DELAY"),
            clock,
        )
        plugins = load_plugins(settings.get_dict("REDIS_MONITOR_PLUGINS"), settings, context=context)
        return cls(context, jobs, plugins, StatsDumper.from_settings(settings, client))

    # --- loop -----------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Rounds until `stop` is set; an idle round waits for new jobs until its next periodic work."""
        log.info("Redis monitor started", extra={"plugins": [type(p).__name__ for p in self.plugins]})
        sleep = self.settings.get_float("REDIS_MONITOR_SLEEP_TIME")
        batch = self.settings.get_int("REDIS_MONITOR_BATCH")
        delay = 0.1
        while not stop.is_set():
            try:
                if not self.run_once(batch):
                    self.jobs.wait(int(self.idle_wait(sleep) * 1000))
                delay = 0.1
            except RETRIABLE as exc:
                log.error("Redis unavailable; retrying", extra={"error": str(exc), "retry_in": delay})
                set_dependency_up("redis", False)
                stop.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF)
            except Exception:  # the loop itself failed (not a job): log, back off, go on
                log.exception("Redis monitor round failed; retrying", extra={"retry_in": delay})
                stop.wait(delay)
                delay = min(delay * 2, MAX_BACKOFF)
        self.close()

    def run_once(self, max_items: int = 100) -> int:
        """One round; returns the jobs and periodic items handled."""
        mark_loop()
        self._acknowledge(self.context.outbox.settle(0))
        jobs = self._take(max_items)
        for job in jobs:
            self._handle(job)
        done = len(jobs) + self._report_bad_entries()
        for plugin in self.periodic:
            done += self._run_periodic(plugin, max_items)
        self._acknowledge(self.context.outbox.settle(SEND_WAIT))
        self._housekeeping()
        set_dependency_up("redis", True)  # the round's reads and writes went through
        return done

    def idle_wait(self, shortest: float) -> float:
        """Seconds an idle round may block on the jobs stream (a new job ends it at once): until the
        next periodic work is due, at least `shortest` (SLEEP_TIME). Waking every 0.1 s instead cost
        an idle monitor 0.5 % of a core (issue 37). A periodic plugin without an `every` (a custom
        one) or answers still unconfirmed keep the short wait."""
        timers = [self.heartbeat_every, self.flush_every, self.reclaim_every]
        for plugin in self.periodic:
            every = getattr(plugin, "every", None)
            if not isinstance(every, Every):
                return shortest
            timers.append(every)
        if self.context.outbox.waiting:
            return shortest
        longest = self.settings.get_float("REDIS_SOCKET_TIMEOUT") / 2  # a blocked read must not time out
        return min(max(min(t.next_at for t in timers) - self.context.clock(), shortest, 0.001), longest)

    def close(self) -> None:
        for plugin in self.plugins:
            close = getattr(plugin, "close", None)
            if close is not None:
                close()
        try:
            self._acknowledge(self.context.outbox.settle(SEND_WAIT))
            self.context.stats.flush()
        except RETRIABLE:
            log.warning("Redis unavailable at shutdown; unacknowledged jobs will be answered again")
        self.context.outbox.close(SEND_WAIT)

    # --- jobs -----------------------------------------------------------------------------------
    def _take(self, max_items: int) -> list[Job]:
        jobs: list[Job] = []
        if self.reclaim_every.due():
            jobs = self.jobs.reclaim(max_items, exclude=self.context.outbox.waiting)
        return jobs + self.jobs.read(max_items - len(jobs))

    def _handle(self, job: Job) -> None:
        """One job, answered or left for a retry; raises only when Redis is unavailable."""
        plugin: Any = None
        try:
            job = _validated(job)
            plugin = next((p for p in self.job_plugins if p.accepts(job)), None)
            if plugin is None:
                self._give_up(job, "No plugin handles this request", f"kind {job.kind!r}: no enabled plugin accepts it")
                return
            messages = plugin.handle(job)
            for message in messages:
                self.context.outbox.answer(message, job.entry_id)
        except RETRIABLE:
            raise  # Redis is down: the round ends, the job stays pending and is tried again
        except InvalidMessage as exc:  # retrying cannot make the request valid
            self._give_up(job, exc.message, exc.cause or "")
            return
        except Exception as exc:  # a job must never stop the monitor
            self._failed(job, plugin, exc)
            return
        self.context.count("total")
        self.context.count(type(plugin).__name__)
        record_job(_job_kind(job), "answered")

    def _failed(self, job: Job, plugin: Any, exc: Exception) -> None:
        self.context.count("fail")
        record_job(_job_kind(job), "failed")
        fields = {"uuid": job.uuid, "appid": job.appid, "kind": job.kind, "plugin": type(plugin).__name__,
                  "attempt": job.deliveries, "entry_id": job.entry_id}  # fmt: skip
        if job.deliveries < self.max_attempts:
            log.error("Job failed; it will be retried", extra=fields, exc_info=exc)
            return
        log.error("Could not process action within failure limit", extra=fields, exc_info=exc)
        self._give_up(job, "Could not process action within failure limit", last_line(exc))

    def _give_up(self, job: Job, message: str, cause: str) -> None:
        """Answer with an error and dead-letter the job; it is acknowledged once Kafka confirms.

        Never raises but for Redis being unavailable: the last resort is an answer and a dead letter
        without the request, and a logged error."""
        try:
            answer = answers.error_answer(job.request, message, cause)
            letter = answers.dead_letter(job.request, f"{message}: {cause}", "redis-monitor",
                                         kind=job.kind, entry_id=job.entry_id, attempts=job.deliveries)  # fmt: skip
        except Exception:
            log.exception("Job's error answer could not be built in full", extra={"entry_id": job.entry_id})
            answer = answers.error_answer(None, message, cause)
            letter = answers.dead_letter(None, f"{message}: {cause}", "redis-monitor", entry_id=job.entry_id)
        answer.update({k: v for k, v in (("uuid", job.uuid), ("appid", job.appid)) if isinstance(v, str)})
        self.context.outbox.answer(answer, job.entry_id)
        self.context.outbox.dead_letter(letter, job.entry_id)
        record_dead_letter("job_failed")

    def _report_bad_entries(self) -> int:
        """Stream entries that are not jobs at all: dead-lettered and dropped."""
        bad, self.jobs.bad = self.jobs.bad, []
        for entry_id, fields in bad:
            if isinstance(fields.get("uuid"), str):  # answered where its requester can be named
                self.context.outbox.answer(answers.error_answer(fields, "unreadable job entry"), entry_id)
            letter = answers.dead_letter(fields, "unreadable job entry", "redis-monitor", entry_id=entry_id)
            self.context.outbox.dead_letter(letter, entry_id)
        if bad:
            record_dead_letter("unreadable_job", len(bad))
        return len(bad)

    def _acknowledge(self, entry_ids: set[str]) -> None:
        self.jobs.done(entry_ids)
        if self.context.outbox.waiting:
            self.jobs.keep(self.context.outbox.waiting)  # not answered yet: no other monitor takes them

    def _run_periodic(self, plugin: Any, max_items: int) -> int:
        try:
            done: int = plugin.run_once(max_items)
            return done
        except RETRIABLE:
            raise
        except Exception:  # one plugin's failure must not stop the others
            self.context.count("fail")
            log.exception("Redis monitor plugin failed", extra={"plugin": type(plugin).__name__})
            return 0

    # --- heartbeat, stats ---------------------------------------------------------------------
    def _housekeeping(self) -> None:
        now = self.context.clock()
        if self.heartbeat_every.due():
            c = self.context
            key = keys.heartbeat("redis-monitor", c.host, c.process_id)
            beat(self.redis, "redis-monitor", c.host, c.process_id, self.settings.get_int("HEARTBEAT_TIMEOUT"), key)
            self.jobs.prune_consumers()
        if self.flush_every.due():
            self.context.stats.flush()
        self.dumper.maybe_dump(now)


def _job_kind(job: Job) -> str:
    """The jobs metric's kind: an action's name (info, stop, ...), else the job's kind (stats, ...);
    a label is never free text from a request."""
    action = job.request.get("action") if isinstance(job.request, dict) else None
    return str(action) if job.kind == "action" and action in _ACTIONS else str(job.kind)[:40]


def _validated(job: Job) -> Job:
    """The job with its request checked against its kind's schema (defaults filled); InvalidMessage
    when refused. A kind without a schema here (a custom plugin's) is left to its plugin."""
    schema = SCHEMAS.get(job.kind)
    if schema is None:
        return job
    if not isinstance(job.request, dict):
        raise InvalidMessage(NO_SCHEMA, cause="a request is a JSON object")
    request = {k: v for k, v in job.request.items() if k not in STAMPS}
    return replace(job, request={**checker(schema)(request), **{k: job.request[k] for k in STAMPS if k in job.request}})
