"""The kafka monitors' and sinks' scaling signal (issue 32), read from the session broker: a group's
lag over its topics' partitions, and the consumers it calls for, never more than the partitions."""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.support.kafka import produce
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, kafka_admin, kafka_consumer
from utils.config.settings import Settings
from utils.observability.metrics.group_lag import GroupLagCollector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def test_group_lag_recommends_consumers_up_to_the_partitions(kafka_bootstrap: str, unique_topic_prefix: str) -> None:
    settings = Settings.load(environ={"SHOAL_KAFKA_HOSTS": kafka_bootstrap})
    incoming, firehose = f"{unique_topic_prefix}.incoming", f"{unique_topic_prefix}.crawled_firehose"
    ensure_topics(settings, [incoming, firehose], partitions=3)
    produce(kafka_bootstrap, incoming, [{"n": n} for n in range(25)])
    produce(kafka_bootstrap, firehose, [{"n": n} for n in range(4)])
    admin, reader = kafka_admin(settings), kafka_consumer(settings, [], None)
    groups = {"kafka-monitor": (f"{unique_topic_prefix}-km", [incoming]),
              "sink": (f"{unique_topic_prefix}-sink", [firehose, f"{unique_topic_prefix}.items"])}  # fmt: skip

    def reading(per_consumer: int) -> dict[str, tuple[int, int, int]]:
        collector = GroupLagCollector(groups, lambda: (admin, reader), per_consumer, 1, cache_seconds=0)
        return {c: (r.lag, r.partitions, r.recommended) for c, r in collector.reading().items()}

    try:
        # The broker answers CoordinatorNotAvailable until its offsets topic exists: a reading then
        # exports nothing, and the next scrape has the figures.
        wait_until(lambda: reading(per_consumer=10), timeout=30)
        # Nothing committed: every message is lag. No items topic: the sink's partitions are the firehose's.
        assert reading(per_consumer=10) == {"kafka-monitor": (25, 3, 3), "sink": (4, 3, 1)}
        assert reading(per_consumer=20) == {"kafka-monitor": (25, 3, 2), "sink": (4, 3, 1)}
        assert reading(per_consumer=1)["kafka-monitor"] == (25, 3, 3)  # capped at the partitions

        committer = kafka_consumer(settings, [], f"{unique_topic_prefix}-km")
        ends = reader.end_offsets([TopicPartition(incoming, p) for p in range(3)])
        committer.commit({tp: OffsetAndMetadata(end, "", -1) for tp, end in ends.items()})
        committer.close()

        assert reading(per_consumer=10)["kafka-monitor"] == (0, 3, 1)  # all read: the minimum
    finally:
        admin.close()
        reader.close()
