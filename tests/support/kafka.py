"""An independent Kafka client for tests (confluent-kafka / librdkafka), not the code under test."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

# Not the reader's failure: no topic yet, or a broker restarting (the fault tests restart Kafka).
PASSING_ERRORS = (
    KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
)  # fmt: skip


def produce(bootstrap: str, topic: str, messages: Iterable[Any]) -> None:
    """Send each message (dict -> JSON; str/bytes as they are) and wait until all are confirmed."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for message in messages:
        value = message if isinstance(message, (str, bytes)) else json.dumps(message)
        producer.produce(topic, value)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages were not confirmed by the broker"


class GroupOffsets:
    """A consumer group's committed offsets on one topic (partition -> the next offset it reads;
    absent: nothing committed), asked through one consumer kept open: a fresh one per look costs
    ~0.1 s, long enough for a test that freezes a process between looks to miss its moment."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def __call__(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        if partitions is None:
            partitions = self.consumer.list_topics(self.topic, timeout=10).topics[self.topic].partitions
        found = self.consumer.committed([TopicPartition(self.topic, p) for p in sorted(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

    def total(self) -> int:
        """Messages the group has committed over all the topic's partitions."""
        return sum(self().values())

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> GroupOffsets:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class TopicReader:
    """Reads a topic from its beginning into `messages` (decoded JSON, or raw text)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.messages: list[Any] = []
        self.partitions: list[int] = []  # the partition of each message, in the same order
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "topic.metadata.refresh.interval.ms": 1000,
            "allow.auto.create.topics": True,
        })  # fmt: skip
        self.consumer.subscribe([topic])

    def poll(self, seconds: float = 0.2) -> int:
        """Read what arrives within `seconds`; returns how many messages were added."""
        added = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for message in self.consumer.consume(num_messages=500, timeout=0.1):
                if message.error():
                    if message.error().code() in PASSING_ERRORS:
                        continue
                    raise AssertionError(f"consumer error: {message.error()}")
                raw = message.value()
                self.partitions.append(message.partition())
                try:
                    self.messages.append(json.loads(raw))
                except ValueError:
                    self.messages.append(raw.decode("utf-8", "replace"))
                added += 1
        return added

    def wait_for(
        self, predicate: Callable[[list[Any]], bool], timeout: float, message: str = ""
    ) -> list[Any]:
        """Poll until `predicate(messages)` holds; AssertionError with `message` on timeout."""
        deadline = time.monotonic() + timeout
        while not predicate(self.messages):
            if time.monotonic() > deadline:
                raise AssertionError(
                    message
                    or f"{self.topic}: condition not met in {timeout} s ({len(self.messages)} messages)"
                )
            self.poll(0.2)
        return self.messages

    def close(self) -> None:
        """Close within 10 s or leave the consumer behind: librdkafka's close can wait without end on
        a group coordinator the test stopped or cut off, and a C call is beyond pytest's timeout."""
        closing = threading.Thread(target=self.consumer.close, name="topic-reader-close", daemon=True)
        closing.start()
        closing.join(10)
