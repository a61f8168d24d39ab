"""The kafka monitor's loop: poll a batch, validate it, stream it to Redis, answer, commit.

Offsets are committed only after the batch's Redis writes succeeded and its answers were
confirmed, so a crash replays the batch; the writes are idempotent (the enqueue script skips a
message already written at its offset, a job is added once per message), so a replay queues
nothing twice. A message is recognised by its offset and its fingerprint (kafka_monitor/batch.py),
so a log that starts afresh (a broker without its data, a recreated topic, another cluster) has
its new messages queued, never taken for replays.
While Redis is down the partitions are paused (the group keeps them), the batch is retried with
back-off, and nothing later is written until it is: no message is lost or reordered.

One batch is in flight at a time: batch n is completed (replies read, answered, committed) once
batch n + 1 has been validated and sent behind it, so Redis and Python work at the same time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
from kafka import KafkaConsumer, KafkaProducer
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError
from redis.exceptions import OutOfMemoryError  # type: ignore[attr-defined]  # types-redis predates it

from kafka_monitor.backpressure import Backpressure
from kafka_monitor.batch import Batch
from kafka_monitor.batch_log import log_batch
from kafka_monitor.dispatch import Dispatcher
from kafka_monitor.outbound import Outbound
from kafka_monitor.partitions import Partitions
from kafka_monitor.stats import MonitorStats
from kafka_monitor.writer import RETRIABLE, BatchWriter, Group, WriteRefused
from utils.config.clients import (
    RedisClient,
    ensure_topics,
    kafka_consumer,
    kafka_producer,
    redis_client,
    subscribe,
)
from utils.config.consumer import IDLE_POLL_MS, CoordinatorWatch, read_to_end
from utils.config.errors import ServiceUnavailable
from utils.config.plugins import load_plugins
from utils.config.settings import Settings
from utils.frontier import Frontier
from utils.observability.metrics import (
    mark_loop,
    observe_batch,
    record_dropped,
    record_enqueued,
    record_incoming,
    record_produced,
    set_dependency_up,
    update_consumer_lag,
)

log = logging.getLogger(__name__)

# Created with incoming when missing.
TOPICS = ("outbound_firehose", "dead_letter", "crawled_firehose", "items", "robots_firehose")
KAFKA_BACKOFF = 1.0  # seconds before a batch that failed on Kafka is read again
LAG_EVERY = 1.0  # seconds between consumer-lag updates (a position lookup per partition)
# An idle monitor's waits: utils.config.clients's fetch_max_wait (500 ms on Apache Kafka, which answers
# a waiting fetch at the first record) and run()'s IDLE_POLL_MS (poll() returns at the first record).
# At 50 ms each the idle monitor took 4.8 % of a core and the broker 7.5 %; at these, 0.68 % and 3.1 %
# (issue 37, 60 s windows; idle wake-up p50 8 ms, bench.latency p50 115 ms). 2 s each gave 0.37 % and
# 2.0 % in 30 s windows; its effect on --burst and on the suite's time is not measured yet.
KINDS = {"ScraperHandler": "crawl", "ActionHandler": "action", "StatsHandler": "stats",
         "ZookeeperHandler": "zookeeper"}  # plugin stats name -> the incoming metric's kind  # fmt: skip


@dataclass
class InFlight:
    """A batch validated and sent to Redis, not yet answered nor committed."""

    batch: Batch
    records: list[ConsumerRecord]
    group: Group


class KafkaMonitor:
    def __init__(
        self,
        settings: Settings,
        consumer: KafkaConsumer,
        producer: KafkaProducer,
        client: RedisClient,
        plugins: list[Any],
    ) -> None:
        self.settings = settings
        self.consumer = consumer
        self.redis = client
        self.plugins = plugins
        self.dispatcher = Dispatcher(plugins)
        self.writer = BatchWriter(client, Frontier.from_settings(settings, client))
        self.outbound = Outbound(producer, settings)
        self.stats = MonitorStats.from_settings(settings, client, self.dispatcher.stat_names)
        self.backpressure = Backpressure.from_settings(settings, client)
        self.chunk = max(settings.get_int("KAFKA_MONITOR_WRITE_CHUNK"), 1)
        self.max_backoff = settings.get_float("KAFKA_MONITOR_RETRY_MAX_BACKOFF")
        self.poll_ms = settings.get_int("KAFKA_CONSUMER_TIMEOUT")
        self.partitions = Partitions(consumer)
        self.unassigned_grace = settings.get_float("KAFKA_MONITOR_UNASSIGNED_GRACE")
        self._unassigned_since: float | None = time.monotonic()  # no partition yet: the group is joining
        self._in_flight: InFlight | None = None
        self._lag_at = 0.0  # monotonic time of the last consumer-lag update
        self.kafka_watch = CoordinatorWatch(settings.get_int("KAFKA_CONSUMER_SESSION_TIMEOUT_MS") / 2000)

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaMonitor:
        incoming = settings.incoming_topic
        ensure_topics(settings, [incoming, *(settings.topic(t) for t in TOPICS)])
        consumer = kafka_consumer(settings, [], settings.get_str("KAFKA_GROUP"))
        client = redis_client(settings)
        plugins = load_plugins(settings.get_dict("KAFKA_MONITOR_PLUGINS"), settings)
        monitor = cls(settings, consumer, kafka_producer(settings), client, plugins)
        subscribe(consumer, [incoming], listener=monitor.partitions.listener())
        return monitor

    # --- loop -----------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Process batches until `stop` is set; the batch in hand is finished first."""
        log.info(
            "Kafka monitor started",
            extra={"topic": self.settings.incoming_topic, "plugins": self.dispatcher.stat_names},
        )
        idle_ms = max(self.poll_ms, IDLE_POLL_MS)
        while not stop.is_set():
            try:
                self.run_once(stop, idle_ms)
                set_dependency_up("kafka", self.kafka_watch.reachable(self.consumer))  # a cut link raises nothing
            except ServiceUnavailable:
                break  # stopped while Redis was down: the batch stays uncommitted, it is read again
            except KafkaError as exc:
                log.error("Kafka error; the batch will be read again", extra={"error": repr(exc)})
                set_dependency_up("kafka", False)
                stop.wait(KAFKA_BACKOFF)
            except Exception:  # a bug outside any one message: never die, never skip a batch
                log.exception("Kafka monitor loop failed; the batch will be read again")
                stop.wait(KAFKA_BACKOFF)
        self.close()

    def run_once(self, stop: threading.Event | None = None, idle_ms: int | None = None) -> int:
        """Poll a batch and send its writes, then complete the batch before it.

        Returns the number of messages completed (written, answered, committed); a poll that finds
        nothing completes the batch in flight. The poll waits KAFKA_CONSUMER_TIMEOUT, or `idle_ms`
        when no batch is in flight (it returns at the first message either way).
        """
        self._tick()
        records = self.partitions.poll(self.poll_ms if idle_ms is None or self._in_flight else idle_ms)
        started = time.perf_counter()
        self._update_lag(started)
        previous, self._in_flight = self._in_flight, None
        current: InFlight | None = None
        done = 0
        try:
            if previous is not None and previous.group.error is not None:
                done, previous = self._complete(previous, stop), None  # rewrite it before sending more
            current = self._start(records) if records else None
            if previous is not None:
                done += self._complete(previous, stop)
        except Exception:
            self._abandon([previous, current])  # read them again: nothing uncommitted is skipped
            raise
        self._in_flight = current
        if records or done:
            observe_batch(time.perf_counter() - started)
        return done

    def flush(self, stop: threading.Event | None = None) -> int:
        """Complete the batch in flight, if any."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return 0
        try:
            return self._complete(in_flight, stop)
        except Exception:
            self._abandon([in_flight])
            raise

    def caught_up(self) -> bool:
        """Whether every assigned partition has been read to its end and completed (--burst's exit)."""
        return self._in_flight is None and read_to_end(self.consumer)

    def close(self) -> None:
        stopping = threading.Event()
        stopping.set()  # one more attempt to complete the batch in flight, no waiting for Redis
        try:
            self.flush(stopping)
        except (KafkaError, ServiceUnavailable, *RETRIABLE) as exc:
            log.warning("Batch in flight not completed at close; it will be read again", extra={"error": repr(exc)})
        self.stats.tick(self.backpressure.state())
        try:
            self.outbound.close()
        finally:
            self.writer.close()
            self.consumer.close()

    # --- steps ----------------------------------------------------------------------------------
    def _start(self, records: list[ConsumerRecord]) -> InFlight:
        """Validate in chunks, each chunk's writes leaving for Redis while the next is validated."""
        batch = Batch(verbose=log.isEnabledFor(logging.INFO), detailed=log.isEnabledFor(logging.DEBUG))
        group = self.writer.begin()
        for chunk in _chunks(records, self.chunk):
            requests, commands = len(batch.requests), len(batch.commands)
            self.dispatcher.process(chunk, batch)
            self.writer.send(group, batch.requests[requests:], batch.commands[commands:])
        return InFlight(batch, records, group)

    def ingest(self, records: list[ConsumerRecord]) -> tuple[Batch, list[str]]:
        """One batch's whole Redis path at once (validated, written, a refused message isolated), not
        answered nor committed; with each request's enqueue status. For tests and tools, when no batch
        is in flight."""
        in_flight = self._start(records)
        return in_flight.batch, self._written(in_flight, None)

    def _written(self, in_flight: InFlight, stop: threading.Event | None) -> list[str]:
        """Replies read, or the batch written again, or message by message when Redis refused it."""
        batch = in_flight.batch
        try:
            placed = self.writer.finish(in_flight.group)
        except RETRIABLE as exc:
            retried = self._write_with_retry(batch, stop, exc)
            placed = retried if retried is not None else self._isolate(in_flight, stop)
        batch.settle_answers(placed)
        return placed

    def _complete(self, in_flight: InFlight, stop: threading.Event | None) -> int:
        """Replies read (or the batch written again), answers confirmed, offsets committed."""
        batch = in_flight.batch
        placed = self._written(in_flight, stop)
        statuses = Counter(placed)
        if statuses.get("replayed"):  # the same messages of the same log, written before a crash
            log.warning("Skipped requests already written", extra={"replayed": statuses["replayed"]})
        self.outbound.send(batch)
        self.partitions.commit(in_flight.records)
        self.stats.count(batch, statuses.get("replayed", 0))
        self._record(batch, statuses)
        log_batch(batch.log_events)
        return len(in_flight.records)

    def _record(self, batch: Batch, statuses: Counter[str]) -> None:
        """A completed batch in the metrics: a few counter increments per batch, none per message."""
        for name, n in batch.handled.items():
            record_incoming(KINDS.get(name, name.lower()), "queued", n)
        spiders = {request.spiderid for request in batch.requests}
        spider = spiders.pop() if len(spiders) == 1 else "mixed"
        for status, n in statuses.items():
            if status == "queued":
                record_enqueued(spider, n)
            else:  # "replayed" too: skipped as already written
                record_dropped(spider, status, n)
        if batch.answers:
            record_produced(self.outbound.outbound_topic, n=len(batch.answers))
        if batch.dead_letters:
            record_produced(self.outbound.dead_letter_topic, n=len(batch.dead_letters))
        set_dependency_up("redis", True)
        set_dependency_up("kafka", True)

    def _update_lag(self, now: float) -> None:
        if now - self._lag_at >= LAG_EVERY:
            self._lag_at = now
            update_consumer_lag(self.consumer)

    def _write_with_retry(self, batch: Batch, stop: threading.Event | None, error: Exception) -> list[str] | None:
        """Write the batch again; while Redis is unavailable, hold it with back-off and read nothing else.

        None when Redis refused what a message holds (a script error, a wrong type, an invalid
        argument): retrying would hold the partition forever, so the caller isolates the message.
        """
        if _poison(error):
            return None
        try:
            return self.writer.write_all(batch.requests, batch.commands)  # e.g. a stale connection
        except RETRIABLE as exc:
            error = exc
        if _poison(error):
            return None
        delay = 0.1
        self.partitions.set_paused("redis", True)
        while True:
            # Loading, read-only, cluster moves: retried, nothing is dropped (a full Redis: `_full`).
            event = (
                "Redis refused the batch; kept, retrying"
                if _refusal(error)
                else "Redis unavailable; batch kept, retrying"
            )
            log.error(event, extra={"error": repr(error), "retry_in": delay, "messages": batch.total})
            set_dependency_up("redis", False)
            self.partitions.idle_poll(delay)
            if stop is not None and stop.is_set():
                raise ServiceUnavailable("stopped while Redis was unavailable") from error
            try:
                statuses = self.writer.write_all(batch.requests, batch.commands)
            except RETRIABLE as exc:
                error, delay = exc, min(delay * 2, self.max_backoff)
                if _poison(error):
                    self.partitions.set_paused("redis", False)
                    return None
                continue
            self.partitions.set_paused("redis", False)
            log.info("Redis is back; resuming", extra={"messages": batch.total})
            return statuses

    def _isolate(self, in_flight: InFlight, stop: threading.Event | None) -> list[str]:
        """Redis refused the batch: write it message by message; one it refuses alone is answered and
        dead-lettered, every other message is written (a poison message never costs the rest)."""
        batch = in_flight.batch
        rebuilt, statuses = batch.emptied(), list[str]()
        for record in in_flight.records:  # rare: only after a refusal
            single = self.dispatcher.process([record], batch.emptied())
            try:
                written = self.writer.write_all(single.requests, single.commands)
            except RETRIABLE as exc:
                retried = self._write_with_retry(single, stop, exc)
                if retried is None:
                    single = batch.emptied()
                    message = FRONTIER_FULL if _full(exc) else REFUSED
                    self.dispatcher.refuse(record, single, message, f"{type(exc).__name__}: {exc}")
                    retried = []
                written = retried
            statuses += written
            rebuilt.absorb(single)
        for name in ("requests", "commands", "answers", "answer_of", "dead_letters", "log_events", "handled", "failed"):
            setattr(batch, name, getattr(rebuilt, name))
        return statuses

    def _abandon(self, batches: list[InFlight | None]) -> None:
        """Give up batches not committed: they will be read (and written, idempotently) again."""
        self.writer.abandon()
        self.partitions.rewind([r for b in batches if b is not None for r in b.records])

    # --- pausing and housekeeping ---------------------------------------------------------------
    def _tick(self) -> None:
        """Backpressure check and stats, each on its own clock."""
        mark_loop()
        self._check_assignment(time.monotonic())
        self.partitions.set_paused("backpressure", self.backpressure.check())
        self.stats.tick(self.backpressure.state())

    def _check_assignment(self, now: float) -> None:
        """A monitor that lost its partitions (fenced out of the group, a broker that forgot it) reads
        nothing while it looks alive: after KAFKA_MONITOR_UNASSIGNED_GRACE without any partition it
        reports the `partitions` dependency down, so shoal_healthy (and the Docker health check) say so."""
        if self.consumer.assignment():
            if self._unassigned_since is not None:
                self._unassigned_since = None
                set_dependency_up("partitions", True)
            return
        if self._unassigned_since is None:
            self._unassigned_since = now
            log.warning("Kafka monitor has no partition assigned", extra={"topic": self.settings.incoming_topic})
        if self.unassigned_grace > 0 and now - self._unassigned_since >= self.unassigned_grace:
            set_dependency_up("partitions", False)


# Refusals of Redis itself (retried); any other ResponseError is about what a message holds. A full
# Redis (maxmemory under noeviction) is not retried: each message it refuses is answered "frontier
# full" and dead-lettered (replayable from the dead-letter topic), so ingestion and the answers of
# the messages that still fit go on, and nothing is ever answered "queued" that was not stored.
_TRANSIENT = (redis.BusyLoadingError, redis.exceptions.NoScriptError,
              redis.exceptions.ReadOnlyError, redis.exceptions.ClusterError, redis.exceptions.ClusterDownError,
              redis.exceptions.TryAgainError, redis.exceptions.MovedError, redis.exceptions.AskError,
              redis.exceptions.MasterDownError, redis.exceptions.NoPermissionError)  # fmt: skip
REFUSED = "Redis refused the request"
FRONTIER_FULL = "frontier full"


def _poison(error: Exception) -> bool:
    """An error about what a message holds: the batch is written message by message."""
    if isinstance(error, WriteRefused):
        return True
    return isinstance(error, redis.ResponseError) and not isinstance(error, _TRANSIENT)


def _full(error: Exception) -> bool:
    """Redis is at its maxmemory and refuses writes (the first write of a script call: nothing of it stored)."""
    return isinstance(error, OutOfMemoryError)


def _refusal(error: Exception) -> bool:
    return isinstance(error, redis.ResponseError) and not isinstance(error, redis.BusyLoadingError)


def _chunks(records: list[ConsumerRecord], size: int) -> Iterator[list[ConsumerRecord]]:
    for start in range(0, len(records), size):
        yield records[start : start + size]
