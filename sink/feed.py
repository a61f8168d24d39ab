"""The sink's side of Kafka: the topics it reads (by pattern, so the items topic is picked up once it
exists), commits after a batch is stored, and pauses that keep the group membership.

While PostgreSQL is down the sink holds its batch and pauses every partition; it still polls so the
group does not evict it, and anything such a poll returns (a partition assigned meanwhile) is sought
back to be read again later: nothing is skipped.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CommitFailedError, KafkaError

from utils.config.clients import kafka_consumer
from utils.config.settings import Settings

log = logging.getLogger(__name__)

TOPIC_SUFFIXES = ("crawled_firehose", "items")


def topic_pattern(settings: Settings) -> str:
    """`^<prefix>\\.(crawled_firehose|items)$`: the firehose now, the items topic once it exists."""
    names = "|".join(re.escape(suffix) for suffix in TOPIC_SUFFIXES)
    return f"^{re.escape(settings.get_str('KAFKA_TOPIC_PREFIX'))}\\.({names})$"


class Feed:
    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.paused = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Feed:
        consumer = kafka_consumer(
            settings, [], settings.get_str("SINK_GROUP"),
            max_poll_records=max(settings.get_int("SINK_BATCH"), 1),
            metadata_max_age_ms=int(settings.get_float("SINK_TOPIC_REFRESH") * 1000),
        )  # fmt: skip
        feed = cls(consumer)
        consumer.subscribe(pattern=topic_pattern(settings), listener=_Rebalance(feed))
        return feed

    def poll(self, timeout_ms: int) -> list[ConsumerRecord]:
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
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for record in records:
            offsets[TopicPartition(record.topic, record.partition)] = OffsetAndMetadata(record.offset + 1, "", -1)
        try:
            self.consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            log.warning("Offsets not committed; the batch will be replayed", extra={"error": repr(exc)})
            return False
        return True

    def rewind(self, records: list[ConsumerRecord]) -> None:
        """Seek back to the first of `records` in every partition still assigned."""
        first: dict[TopicPartition, int] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            first[tp] = min(first.get(tp, record.offset), record.offset)
        assigned = self.consumer.assignment()
        for tp, offset in first.items():
            if tp in assigned:
                self.consumer.seek(tp, offset)

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
