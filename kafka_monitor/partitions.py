"""The consumer side of the monitor's loop: commits, rewinds, pauses for named reasons, rebalances.

Partitions are paused (the group keeps them, Kafka keeps the backlog) while any reason holds:
backpressure, or a batch waiting for Redis to come back. Partitions assigned meanwhile start
paused, and anything a keep-alive poll returns is read again later, so a pause loses nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord

from utils.config.consumer import commit_past, rewind

log = logging.getLogger(__name__)


class Partitions:
    def __init__(self, consumer: KafkaConsumer) -> None:
        self.consumer = consumer
        self.reasons: set[str] = set()  # why the partitions are paused

    def listener(self) -> ConsumerRebalanceListener:
        return _Rebalance(self)

    def poll(self, timeout_ms: int) -> list[ConsumerRecord]:
        return [record for part in self.consumer.poll(timeout_ms=timeout_ms).values() for record in part]

    def commit(self, records: list[ConsumerRecord]) -> bool:
        """Commit past `records`; False when it failed (the new owner replays, idempotently)."""
        return commit_past(self.consumer, records)

    def rewind(self, records: list[ConsumerRecord]) -> None:
        """Seek back to the first of `records` in each partition still assigned: read them again."""
        rewind(self.consumer, records)

    def idle_poll(self, seconds: float) -> None:
        """A poll that only keeps the group membership; anything it returns is read again later."""
        records = self.poll(int(seconds * 1000))
        if records:
            self.rewind(records)

    def set_paused(self, reason: str, on: bool) -> None:
        if on == (reason in self.reasons):
            return
        if on:
            self.reasons.add(reason)
            self.consumer.pause(*self.consumer.assignment())
        else:
            self.reasons.discard(reason)
            if not self.reasons:
                self.consumer.resume(*self.consumer.paused())

    def on_assigned(self, partitions: Any) -> None:
        """New partitions start paused while the others are (called inside poll, before any fetch)."""
        if self.reasons and partitions:
            self.consumer.pause(*partitions)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Logs which partitions a monitor reads; nothing to save on revocation (each batch commits)."""

    def __init__(self, partitions: Partitions) -> None:
        self.partitions = partitions

    def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:
            log.info("Partitions revoked", extra={"partitions": _names(revoked)})

    def on_partitions_assigned(self, assigned: Any) -> None:
        log.info("Partitions assigned", extra={"partitions": _names(assigned)})
        self.partitions.on_assigned(assigned)


def _names(partitions: Any) -> list[str]:
    return sorted(f"{tp.topic}/{tp.partition}" for tp in partitions)
