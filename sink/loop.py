"""The sink's loop: poll a batch, dead-letter what cannot be stored, write the rest in one transaction,
then commit the offsets.

PostgreSQL down or restarted: the batch is kept, the partitions paused, the write retried with
back-off (doubling up to SINK_RETRY_MAX_BACKOFF) and the state change logged once each way; nothing
is committed until the batch is in. A batch PostgreSQL refuses for its data (not for being down) is
written message by message, and the messages it refuses are dead-lettered.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import ujson
from kafka import KafkaProducer
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError

from sink.feed import Feed
from sink.messages import Parser, Rows
from sink.schema import Tables
from sink.stats import SinkStats
from sink.store import Store, Written, unavailable
from utils.config.clients import ensure_topics, kafka_producer
from utils.config.consumer import IDLE_POLL_MS, CoordinatorWatch, read_to_end
from utils.config.postgres import postgres_conninfo, postgres_target
from utils.config.settings import Settings
from utils.observability.metrics import (
    mark_loop,
    observe_batch,
    record_dead_letter,
    record_produced,
    set_dependency_up,
    update_consumer_lag,
)
from utils.schemas import answers

log = logging.getLogger(__name__)

SEND_TIMEOUT = 30.0  # seconds the dead letters of a batch may take to be confirmed
KAFKA_BACKOFF = 1.0  # seconds before a batch whose dead letters could not be sent is read again
FIRST_BACKOFF = 0.2  # seconds; first wait after PostgreSQL failed
LAG_EVERY = 1.0  # seconds between consumer-lag updates


class Sink:
    def __init__(
        self, settings: Settings, feed: Feed, producer: KafkaProducer, store: Store, stats: SinkStats | None = None
    ) -> None:
        self.feed = feed
        self.stats = stats
        self.producer = producer
        self.store = store
        self.parser = Parser(settings.topic("items"), settings.get_bool("SINK_STORE_BODY"),
                             settings.get_str("SINK_ITEM_KEY"))  # fmt: skip
        self.dead_letter_topic = settings.topic("dead_letter")
        self.poll_ms = settings.get_int("KAFKA_CONSUMER_TIMEOUT")
        self.batch_size = max(settings.get_int("SINK_BATCH"), 1)
        self.linger = settings.get_float("SINK_BATCH_LINGER")
        self.max_backoff = settings.get_float("SINK_RETRY_MAX_BACKOFF")
        self.target = postgres_target(settings)
        self.postgres_up = True
        self.written = Written()  # totals since start, for the log and the tests
        self.dead_lettered = 0  # messages sent to the dead-letter topic since start
        self._lag_at = 0.0
        self.kafka_watch = CoordinatorWatch(settings.get_int("KAFKA_CONSUMER_SESSION_TIMEOUT_MS") / 2000)

    @classmethod
    def from_settings(cls, settings: Settings) -> Sink:
        ensure_topics(settings, [settings.topic("crawled_firehose"), settings.topic("dead_letter")])
        store = Store(postgres_conninfo(settings), Tables.from_settings(settings),
                      settings.get_float("SINK_POSTGRES_OPERATION_TIMEOUT"))  # fmt: skip
        return cls(settings, Feed.from_settings(settings), kafka_producer(settings), store,
                   SinkStats.from_settings(settings))  # fmt: skip

    def run(self, stop: threading.Event) -> None:
        """Process batches until `stop` is set; the batch in hand is finished (or left uncommitted)."""
        log.info("Sink started", extra={"postgres": self.target})
        try:
            self.store.connect()  # the schema is there (migrated) before the first batch
        except psycopg.Error as exc:
            self._set_up(False, exc)  # the first batch waits for it
        while not stop.is_set():
            try:
                self.run_once(stop, IDLE_POLL_MS)
                set_dependency_up("kafka", self.kafka_watch.reachable(self.feed.consumer))  # a cut link raises nothing
            except KafkaError as exc:
                log.error("Kafka error; the batch will be read again", extra={"error": repr(exc)})
                set_dependency_up("kafka", False)
                stop.wait(KAFKA_BACKOFF)
        self.close()

    def run_once(self, stop: threading.Event | None = None, wait_ms: int | None = None) -> int:
        """One batch: poll (at most `wait_ms`, default KAFKA_CONSUMER_TIMEOUT), store, commit.
        Returns the messages handled (0 when none came)."""
        stop = stop or threading.Event()
        mark_loop()
        self._update_lag()
        if self.stats is not None:
            self.stats.tick()
        records = self.feed.poll_batch(wait_ms or self.poll_ms, self.batch_size, self.linger)
        if not records:
            return 0
        began = time.monotonic()
        rows = self.parser.parse(records)
        before = (self.dead_lettered, self.written.pages, self.written.items, self.written.log)
        try:
            self._send_dead_letters(rows)
        except KafkaError:
            self.feed.rewind(records)
            raise
        if not self._write_until_stored(rows, records, stop):
            return 0  # stopped while PostgreSQL was down: uncommitted, read again by whoever owns it next
        self.feed.commit(records)
        set_dependency_up("kafka", True)
        observe_batch(time.monotonic() - began)
        after = (self.dead_lettered, self.written.pages, self.written.items, self.written.log)
        dead, pages, items, log_rows = (now - then for now, then in zip(after, before, strict=True))
        if self.stats is not None:
            self.stats.count(len(records), dead, {"pages": pages, "items": items, "crawl_log": log_rows})
        log.debug("Batch stored", extra={"messages": len(records), "dead_letters": dead})
        return len(records)

    def _send_dead_letters(self, rows: Rows) -> None:
        """Send and wait: a dead letter is on Kafka before its offset can be committed."""
        if not rows.dead_letters:
            return
        futures = [self.producer.send(self.dead_letter_topic, answers.encode(letter)) for letter in rows.dead_letters]
        self.producer.flush(timeout=SEND_TIMEOUT)
        for future in futures:
            future.get(timeout=0)
        for letter in rows.dead_letters:
            log.warning("Message dead-lettered", extra={"error": letter["error"], "kafka": letter.get("kafka")})
            record_dead_letter("sink")
        self.dead_lettered += len(rows.dead_letters)
        record_produced(self.dead_letter_topic, n=len(futures))
        rows.dead_letters.clear()

    def _write_until_stored(self, rows: Rows, records: list[ConsumerRecord], stop: threading.Event) -> bool:
        """Write the batch, retrying with back-off while PostgreSQL is unavailable; False if stopped."""
        delay = FIRST_BACKOFF
        while True:
            try:
                self.store.connect()  # connecting and migrating can only fail for the server's sake
                self._add(self._write(rows, records))
            except psycopg.Error as exc:  # only unavailability comes out of _write
                self._set_up(False, exc)
                self.feed.pause()
                if not self._wait(delay, stop):
                    self.feed.rewind(records)
                    self.feed.resume()
                    return False
                delay = min(delay * 2, self.max_backoff)
                continue
            self._set_up(True)
            if self.feed.paused:
                self.feed.resume()
            return True

    def _write(self, rows: Rows, records: list[ConsumerRecord]) -> Written:
        """The batch in one transaction; refused for its data, message by message (the refused dead-lettered)."""
        try:
            return self.store.write(rows)
        except (psycopg.Error, UnicodeError) as exc:
            if unavailable(exc):
                raise
            log.warning("Batch refused by PostgreSQL; writing it message by message", extra={"error": str(exc)})
        total = Written()
        for record in records:
            single = self.parser.parse([record])
            try:
                written = self.store.write(single)
            except (psycopg.Error, UnicodeError) as exc:
                if unavailable(exc):
                    raise
                letter = answers.dead_letter(_raw(record), f"refused by PostgreSQL: {exc}", "sink")
                single = Rows(dead_letters=[letter])
                self._send_dead_letters(single)
                continue
            total.pages, total.items, total.log = (total.pages + written.pages, total.items + written.items,
                                                   total.log + written.log)  # fmt: skip
        return total

    def _wait(self, seconds: float, stop: threading.Event) -> bool:
        """Wait `seconds` in short slices, polling to keep the group membership; False once stopped."""
        deadline = time.monotonic() + seconds
        while not stop.is_set():
            self.feed.keep_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            stop.wait(min(remaining, 0.5))
        return False

    def _set_up(self, up: bool, error: BaseException | None = None) -> None:
        """Log PostgreSQL's state only when it changes (one line down, one line back)."""
        set_dependency_up("postgres", up)
        if up == self.postgres_up:
            return
        self.postgres_up = up
        if up:
            log.info("PostgreSQL available again; writing resumed", extra={"postgres": self.target})
        else:
            log.error("PostgreSQL unavailable; holding the batch and retrying with back-off",
                      extra={"postgres": self.target, "error": str(error).strip()[:300]})  # fmt: skip

    def _add(self, written: Written) -> None:
        self.written.pages += written.pages
        self.written.items += written.items
        self.written.log += written.log

    def _update_lag(self) -> None:
        now = time.monotonic()
        if now - self._lag_at >= LAG_EVERY:
            self._lag_at = now
            update_consumer_lag(self.feed.consumer)

    def caught_up(self) -> bool:
        """Whether every assigned partition is read to its end (for --burst)."""
        return read_to_end(self.feed.consumer)

    def close(self) -> None:
        if self.stats is not None:
            self.stats.close()
        self.feed.close()
        self.producer.flush(timeout=10)
        self.producer.close(timeout=10)
        self.store.close()
        log.info("Sink stopped", extra={"pages": self.written.pages, "items": self.written.items,
                                        "crawl_log": self.written.log})  # fmt: skip


def _raw(record: ConsumerRecord) -> Any:
    try:
        return ujson.loads(record.value)
    except (ValueError, TypeError):
        return record.value
