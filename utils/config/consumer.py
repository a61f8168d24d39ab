"""The consumer side every Kafka-reading component shares (the kafka monitor, the sink): commit past
a batch, read a batch again, tell when the assigned partitions are read to their end, and `--burst`.

The clients themselves come from utils/config/clients.py; what a component does between a poll and
a commit stays in its own loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CommitFailedError, KafkaError

log = logging.getLogger(__name__)

# run()'s poll in a long-running consumer loop (ms). poll() returns at the first record, so this
# delays nothing: it only sets how often an idle loop wakes (20 times a second at
# KAFKA_CONSUMER_TIMEOUT's 50 ms: issue 37). run_once() alone, as tests drive it, keeps the short poll.
IDLE_POLL_MS = 1000
JOIN_TIMEOUT = 60.0  # seconds a burst waits to be given partitions (all may belong to other members)


class CoordinatorWatch:
    """Whether a group consumer can reach Kafka, for its component's health.

    A consumer whose link is cut or half-open does not raise: poll() returns nothing, as on an idle
    topic. What changes is the group coordinator: kafka-python marks it dead when a request to it
    fails or no heartbeat succeeds for the session timeout, and finds no new one while the link is
    down. Unknown for `grace` seconds (a join at start, a coordinator moving, take a moment) is down.
    """

    def __init__(self, grace: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self.clock = clock
        self._lost_since: float | None = None

    def reachable(self, consumer: KafkaConsumer) -> bool:
        coordinator = getattr(consumer, "_coordinator", None)  # kafka-python's; a group-less consumer has none
        if coordinator is None or not coordinator.coordinator_unknown():
            self._lost_since = None
            return True
        now = self.clock()
        if self._lost_since is None:
            self._lost_since = now
        return now - self._lost_since < self.grace


def commit_past(consumer: KafkaConsumer, records: list[ConsumerRecord]) -> bool:
    """Commit past `records`; False when it failed (a rebalance, the broker away): the partition's
    next owner replays the batch, which every component writes idempotently."""
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for record in records:
        offsets[TopicPartition(record.topic, record.partition)] = OffsetAndMetadata(record.offset + 1, "", -1)
    try:
        consumer.commit(offsets)
    except (CommitFailedError, KafkaError) as exc:
        log.warning("Offsets not committed; the batch will be replayed", extra={"error": repr(exc)})
        return False
    return True


def rewind(consumer: KafkaConsumer, records: list[ConsumerRecord]) -> None:
    """Seek back to the first of `records` in each partition still assigned: they are read again."""
    first: dict[TopicPartition, int] = {}
    for record in records:
        tp = TopicPartition(record.topic, record.partition)
        first[tp] = min(first.get(tp, record.offset), record.offset)
    assigned = consumer.assignment()
    for tp, offset in first.items():
        if tp in assigned:
            consumer.seek(tp, offset)


def read_to_end(consumer: KafkaConsumer) -> bool:
    """Whether every assigned partition is read to its end (False while none is assigned)."""
    assigned = list(consumer.assignment())
    if not assigned:
        return False
    ends = consumer.end_offsets(assigned)
    return all(consumer.position(tp) >= end for tp, end in ends.items())


class BurstLoop(Protocol):
    """A component's loop as `run_burst` drives it."""

    def run_once(self, stop: threading.Event) -> int: ...

    def caught_up(self) -> bool: ...

    def close(self) -> None: ...


def run_burst(
    loop: BurstLoop, assigned: Callable[[], bool], stop: threading.Event, join_timeout: float = JOIN_TIMEOUT
) -> int:
    """`--burst`: run `loop` until it has caught up with every assigned partition, or until no
    partition was assigned (`assigned()`) within `join_timeout` s; then close it. Returns the
    messages handled."""
    handled = 0
    deadline = time.monotonic() + join_timeout
    while not stop.is_set():
        n = loop.run_once(stop)
        handled += n
        if n:
            continue
        if loop.caught_up() or (not assigned() and time.monotonic() > deadline):
            break
    log.info("Burst done", extra={"messages": handled})
    loop.close()
    return handled
