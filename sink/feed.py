"""The sink's side of Kafka: the topics it reads (the items topic too, once it exists: checked every
SINK_TOPIC_REFRESH seconds), commits after a batch is stored, and pauses that keep the group membership.

While PostgreSQL is down the sink holds its batch and pauses every partition; it still polls so the
group does not evict it, and anything such a poll returns (a partition assigned meanwhile) is sought
back to be read again later: nothing is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError

from utils.config.clients import kafka_consumer, subscribe
from utils.config.consumer import commit_past, rewind
from utils.config.settings import Settings

log = logging.getLogger(__name__)

class Feed:
    def __init__(self, new_consumer: Callable[[], KafkaConsumer], topics: list[str], refresh: float) -> None:
        self.new_consumer = new_consumer
        self.consumer = new_consumer()
        self.wanted = topics  # the firehose, then the items topic
        self.subscribed: list[str] = []
        self.refresh = refresh
        self.paused = False
        self._checked_at = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> Feed:
        def new_consumer() -> KafkaConsumer:
            return kafka_consumer(settings, [], settings.get_str("SINK_GROUP"),
                                  max_poll_records=max(settings.get_int("SINK_BATCH"), 1))  # fmt: skip

        topics = [settings.topic("crawled_firehose"), settings.topic("items")]
        feed = cls(new_consumer, topics, settings.get_float("SINK_TOPIC_REFRESH"))
        feed.subscribe_existing()
        return feed

    def subscribe_existing(self) -> None:
        """Read every wanted topic that exists (the firehose always: it is created at start-up).

        A topic that appears later (checked every `refresh` seconds) is read by a new consumer that
        joins the group with both topics: changing a live subscription left the group's second
        rebalance hanging under load (kafka-python 3.0 against Tansu). Called only between batches,
        when every offset handled is committed, so the switch replays nothing and skips nothing.
        """
        now = time.monotonic()
        if self.paused or len(self.subscribed) == len(self.wanted) or now - self._checked_at < self.refresh:
            return
        self._checked_at = now
        try:
            existing = self.consumer.topics()
        except KafkaError as exc:
            log.warning("Cannot list the topics", extra={"error": repr(exc)})
            return
        topics = [topic for topic in self.wanted if topic == self.wanted[0] or topic in existing]
        if topics == self.subscribed:
            return
        if self.subscribed:
            self.consumer.close(autocommit=False)
            self.consumer = self.new_consumer()
        subscribe(self.consumer, topics, listener=_Rebalance(self))
        self.subscribed = topics
        log.info("Reading topics", extra={"topics": topics})

    def poll(self, timeout_ms: int) -> list[ConsumerRecord]:
        self.subscribe_existing()
        return [record for part in self.consumer.poll(timeout_ms=timeout_ms).values() for record in part]

    def poll_batch(self, timeout_ms: int, size: int, linger: float) -> list[ConsumerRecord]:
        """Up to `size` records: after the first poll brought some, poll again for at most `linger`
        seconds while more arrive (a fetch brings one producer batch per partition: ~40 pages of a
        live crawl; one transaction per 40 rows would cost ~3x more per row)."""
        records = self.poll(timeout_ms)
        if not records:
            return records
        deadline = time.monotonic() + linger
        while len(records) < size and time.monotonic() < deadline:
            more = self.consumer.poll(timeout_ms=max(int((deadline - time.monotonic()) * 1000), 0),
                                      max_records=size - len(records))  # fmt: skip
            if not more:
                break
            records.extend(record for part in more.values() for record in part)
        return records

    def commit(self, records: list[ConsumerRecord]) -> bool:
        """Commit past `records`; False when it failed (a rebalance: the new owner replays, harmlessly)."""
        return commit_past(self.consumer, records)

    def rewind(self, records: list[ConsumerRecord]) -> None:
        """Seek back to the first of `records` in every partition still assigned."""
        rewind(self.consumer, records)

    def pause(self) -> None:
        self.paused = True
        self.consumer.pause(*self.consumer.assignment())

    def resume(self) -> None:
        self.paused = False
        self.consumer.resume(*self.consumer.paused())

    def keep_alive(self) -> None:
        """A poll while paused: group heartbeats and rebalances go on, no record is consumed."""
        records = self.poll(0)
        if records:
            self.rewind(records)
            self.consumer.pause(*self.consumer.assignment())

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, feed: Feed) -> None:
        self.feed = feed

    def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:
            log.info("Partitions revoked", extra={"partitions": sorted(f"{tp.topic}/{tp.partition}" for tp in revoked)})

    def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("Partitions assigned", extra={"partitions": sorted(f"{tp.topic}/{tp.partition}" for tp in assigned)})
        if self.feed.paused and assigned:
            self.feed.consumer.pause(*assigned)
