"""The gateway's Kafka plumbing: is a broker there, and a group-less consumer at a topic's end."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition

from utils.config.clients import ensure_topics, kafka_consumer
from utils.config.settings import Settings
from utils.services import broker_ready

DEFAULT_KAFKA_PORT = 9092

def broker_reachable(settings: Settings) -> bool:
    """A broker of KAFKA_HOSTS answers a Metadata request (a cheap probe, no client state)."""
    for address in settings.get_list("KAFKA_HOSTS"):
        host, sep, port = address.rpartition(":")
        if broker_ready(host if sep else address, int(port) if sep else DEFAULT_KAFKA_PORT):
            return True
    return False


def consumer_at_end(settings: Settings, topic: str) -> KafkaConsumer:
    """A consumer with no group (every gateway sees every message) on all of `topic`'s partitions,
    positioned at their end now, so nothing sent after this call is missed. A missing topic is
    created first (as the monitors do), so its partitions are known."""
    ensure_topics(settings, [topic])
    consumer = kafka_consumer(settings, [], None, auto_offset_reset="latest")
    partitions = consumer.partitions_for_topic(topic) or {0}
    assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(assigned)
    consumer.seek_to_end(*assigned)
    for tp in assigned:
        consumer.position(tp)  # resolve the end offsets now, not at the first poll
    return consumer


def seek_to_end(consumer: KafkaConsumer) -> None:
    """Skip what arrived while nobody listened."""
    assigned = list(consumer.assignment())
    consumer.seek_to_end(*assigned)
    for tp in assigned:
        consumer.position(tp)
