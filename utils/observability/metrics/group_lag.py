"""Consumer-group lag and the consumer count it calls for, for the kafka monitors and sinks (issue 32).

Each consumer exports the lag of the partitions it owns (kafka_lag.py); with no consumer running,
or one stuck, nobody does. This reads the group's committed offsets from the broker instead, so one
process (the redis monitor) exports the whole group's lag, and the consumer count an autoscaler
should run: ceil(lag / SCALING_LAG_PER_CONSUMER), never more than the partitions (a consumer past
them idles: KEDA's `allowIdleConsumers: false`), never fewer than SCALING_MIN_REPLICAS.
Cost per reading: one OffsetFetch and two ListOffsets requests per group; cached like the frontier's.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from utils.config.settings import Settings
from utils.observability.metrics.cached import CachedReading
from utils.observability.metrics.registry import CollectorSlot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupLag:
    lag: int  # messages not yet committed by the group, over its topics' partitions
    partitions: int
    recommended: int  # consumers


def recommended_consumers(lag: int, partitions: int, per_consumer: int, minimum: int) -> int:
    wanted = math.ceil(lag / per_consumer) if per_consumer > 0 else partitions
    return max(min(wanted, partitions), min(minimum, partitions) if partitions else minimum)


def read_group_lag(admin: Any, consumer: Any, group: str, topics: list[str], per_consumer: int,
                   minimum: int) -> GroupLag:  # fmt: skip
    """The lag of `group` on `topics` (a partition it never committed counts from its first offset)."""
    from kafka import TopicPartition  # the caller has kafka-python loaded already

    parts = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
    if not parts:
        return GroupLag(0, 0, minimum)
    committed = _committed(admin, group)
    ends, starts = consumer.end_offsets(parts), consumer.beginning_offsets(parts)
    lag = 0
    for tp in parts:
        done = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else starts[tp]
        lag += max(ends[tp] - done, 0)
    return GroupLag(lag, len(parts), recommended_consumers(lag, len(parts), per_consumer, minimum))


def _committed(admin: Any, group: str) -> dict[Any, Any]:
    """{TopicPartition: OffsetAndMetadata} the group committed (kafka-python 3's call, or 2's)."""
    if hasattr(admin, "list_group_offsets"):
        return dict(admin.list_group_offsets([group]).get(group) or {})
    return dict(admin.list_consumer_group_offsets(group))


def lag_groups(settings: Settings) -> dict[str, tuple[str, list[str]]]:
    """component -> (its consumer group, the topics it reads): the kafka monitors' and the sinks'."""
    incoming = settings.get_str("KAFKA_INCOMING_TOPIC") or settings.topic("incoming")
    return {
        "kafka-monitor": (settings.get_str("KAFKA_GROUP"), [incoming]),
        "sink": (settings.get_str("SINK_GROUP"), [settings.topic("crawled_firehose"), settings.topic("items")]),
    }


class GroupLagCollector(Collector):
    """Exports shoal_consumer_group_lag and shoal_scaling_recommended_consumers per component;
    a failed reading exports nothing for that component (and logs why)."""

    def __init__(
        self, groups: dict[str, tuple[str, list[str]]], connect: Callable[[], tuple[Any, Any]], per_consumer: int,
        minimum: int, cache_seconds: float, clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.groups = groups  # component -> (group id, topics)
        self.connect = connect  # -> (admin client, group-less consumer), made at the first reading
        self.per_consumer = per_consumer
        self.minimum = minimum
        self._clients: tuple[Any, Any] | None = None
        self._reading = CachedReading(self._read, cache_seconds, clock)

    @classmethod
    def from_settings(cls, settings: Settings) -> GroupLagCollector:
        from utils.config.clients import kafka_admin, kafka_consumer  # kafka-python: only where a collector is made

        return cls(
            lag_groups(settings), lambda: (kafka_admin(settings), kafka_consumer(settings, [], None)),
            settings.get_int("SCALING_LAG_PER_CONSUMER"), settings.get_int("SCALING_MIN_REPLICAS"),
            settings.get_float("METRICS_FRONTIER_CACHE"),
        )  # fmt: skip

    def reading(self) -> dict[str, GroupLag]:
        """The cached reading if fresh, else a new one; a component whose reading failed is left out."""
        return self._reading.get()

    def _read(self) -> dict[str, GroupLag]:
        found: dict[str, GroupLag] = {}
        try:
            if self._clients is None:
                self._clients = self.connect()
            admin, consumer = self._clients
            for component, (group, topics) in self.groups.items():
                found[component] = read_group_lag(admin, consumer, group, topics, self.per_consumer, self.minimum)
        except Exception as exc:  # a broker away: no figures this time, the scrape goes on
            log.warning("Consumer group lag reading failed", extra={"error": str(exc)})
        return found

    def describe(self) -> Iterator[Metric]:
        yield from _families().values()

    def collect(self) -> Iterator[Metric]:
        families = _families()
        for component, reading in sorted(self.reading().items()):
            families["lag"].add_metric([component], reading.lag)
            families["partitions"].add_metric([component], reading.partitions)
            families["recommended"].add_metric([component], reading.recommended)
        yield from families.values()


def _families() -> dict[str, GaugeMetricFamily]:
    component = ["component"]
    return {
        "lag": GaugeMetricFamily(
            "shoal_consumer_group_lag", "Messages the component's consumer group has not committed", labels=component
        ),
        "partitions": GaugeMetricFamily(
            "shoal_consumer_group_partitions", "Partitions of the topics the group reads (most useful consumers)",
            labels=component,
        ),  # fmt: skip
        "recommended": GaugeMetricFamily(
            "shoal_scaling_recommended_consumers", "Consumers the lag calls for, at most the partitions",
            labels=component,
        ),  # fmt: skip
    }


_slot = CollectorSlot()


def register_group_lag_collector(settings: Settings) -> GroupLagCollector:
    """Export the consumer groups' lag from this process (replacing a collector registered before)."""
    collector = GroupLagCollector.from_settings(settings)
    _slot.replace(collector)
    return collector
