"""Kafka consumer lag per assigned partition, from the consumer's own fetch metadata.

The high-water mark comes with every fetch response, so after a poll the lag costs no broker call.
Call `update_consumer_lag` from the thread that polls (kafka-python consumers are not thread-safe),
e.g. once per batch. Partitions taken away by a rebalance are removed, so each process exports only
the partitions it owns and `sum by (topic)` over processes is the group's lag.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from utils.observability.metrics.registry import CONSUMER_LAG, STATE

if TYPE_CHECKING:  # kafka-python costs ~100 ms to import; `shoal status` imports this package
    from kafka import KafkaConsumer

log = logging.getLogger(__name__)

POSITION_TIMEOUT_MS = 100  # milliseconds; a position not known after a poll is skipped, not awaited

_exported: set[tuple[str, str, str]] = set()  # (component, topic, partition) series this process set
_lock = threading.Lock()


def set_consumer_lag(topic: str, partition: int, lag: int) -> None:
    """Set one partition's lag (for consumers other than kafka-python's)."""
    key = (STATE.component, topic, str(partition))
    with _lock:
        _exported.add(key)
    CONSUMER_LAG.labels(*key).set(max(lag, 0))


def forget_partitions(keep: set[tuple[str, int]]) -> None:
    """Remove the lag series of partitions not in `keep` ((topic, partition) pairs)."""
    wanted = {(STATE.component, topic, str(partition)) for topic, partition in keep}
    with _lock:
        stale = {key for key in _exported if key[0] == STATE.component} - wanted
        _exported.difference_update(stale)
    for key in stale:
        try:
            CONSUMER_LAG.remove(*key)
        except KeyError:
            pass


def update_consumer_lag(consumer: KafkaConsumer) -> dict[tuple[str, int], int]:
    """Export `high-water - position` of each assigned partition; returns what it set."""
    from kafka.errors import KafkaError  # the caller has kafka-python loaded already

    assigned = consumer.assignment() or set()
    lags: dict[tuple[str, int], int] = {}
    for tp in assigned:
        try:
            high = consumer.highwater(tp)
            position = consumer.position(tp, timeout_ms=POSITION_TIMEOUT_MS) if high is not None else None
        except KafkaError as exc:  # e.g. revoked between assignment() and here
            log.debug("no lag for %s: %s", tp, exc)
            continue
        if high is not None and position is not None:
            lags[(tp.topic, tp.partition)] = max(high - position, 0)
    for (topic, partition), lag in lags.items():
        set_consumer_lag(topic, partition, lag)
    forget_partitions({(tp.topic, tp.partition) for tp in assigned})
    return lags
