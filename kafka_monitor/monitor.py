"""The kafka monitor's loop: poll a batch, validate, write it to Redis in one pipeline, answer, commit.

Offsets are committed only after the batch's Redis writes succeeded, so a crash replays the batch;
the writes are idempotent (the enqueue script skips offsets already written), so a replay queues
nothing twice. While Redis is down the consumer is paused (the group keeps its partitions), the
batch is retried with back-off, and nothing later is read until it is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

import redis
import ujson
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from kafka_monitor.batch import Batch, Origin
from utils import answers, schemas
from utils.clients import RedisClient, ensure_topics, kafka_consumer, kafka_producer, redis_client
from utils.errors import InvalidMessage
from utils.frontier import Frontier
from utils.plugins import load_plugins
from utils.settings import Settings

log = logging.getLogger(__name__)

MAX_BACKOFF = 10.0  # seconds between attempts to write a batch while Redis is down


class KafkaMonitor:
    def __init__(
        self,
        settings: Settings,
        consumer: KafkaConsumer,
        producer: KafkaProducer,
        client: RedisClient,
        plugins: list[Any],
    ) -> None:
        self.settings = settings
        self.consumer = consumer
        self.producer = producer
        self.redis = client
        self.frontier = Frontier.from_settings(settings, client)
        self.plugins = plugins
        self.outbound_topic = settings.topic("outbound_firehose")
        self.dead_letter_topic = settings.topic("dead_letter")

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaMonitor:
        topics = [settings.incoming_topic, settings.topic("outbound_firehose"), settings.topic("dead_letter")]
        ensure_topics(settings, topics)
        consumer = kafka_consumer(settings, [settings.incoming_topic], settings.get_str("KAFKA_GROUP"))
        client = redis_client(settings)
        plugins = load_plugins(settings.get_dict("KAFKA_MONITOR_PLUGINS"), settings)
        return cls(settings, consumer, kafka_producer(settings), client, plugins)

    # --- loop -----------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Process batches until `stop` is set; the batch in hand is finished first."""
        log.info("Kafka monitor started", extra={"topic": self.settings.incoming_topic})
        while not stop.is_set():
            self.run_once(stop=stop)
        self.close()

    def run_once(self, stop: threading.Event | None = None) -> int:
        """Poll one batch and see it through; returns the number of messages handled."""
        polled = self.consumer.poll(timeout_ms=self.settings.get_int("KAFKA_CONSUMER_TIMEOUT"))
        records = [record for part in polled.values() for record in part]
        if not records:
            return 0
        batch = self.process(records)
        self._write_with_retry(batch, stop)
        self._send(batch)
        self._commit(records)
        for event, fields in batch.log_events:
            log.info(event, extra=fields)
        return len(records)

    def close(self) -> None:
        self.producer.flush(timeout=10)
        self.producer.close(timeout=10)
        self.consumer.close()

    # --- steps ----------------------------------------------------------------------------------
    def process(self, records: Iterable[ConsumerRecord]) -> Batch:
        """Validate and dispatch every record; a bad one is answered and dead-lettered."""
        batch = Batch()
        for record in records:
            batch.total += 1
            origin = Origin(record.topic, record.partition, record.offset)
            raw: Any = record.value
            try:
                raw = _decode(record.value)
                plugin, message = self._match(raw)
                plugin.handle(message, origin, batch)
                batch.count(type(plugin).__name__)
            except InvalidMessage as exc:
                self._reject(batch, raw, origin, exc.message, exc.cause)
            except Exception as exc:  # a handler bug must not stop the monitor
                log.exception("Plugin failed", extra={"origin": origin.id})
                self._reject(batch, raw, origin, "handler failure", f"{type(exc).__name__}: {exc}")
        return batch

    def _match(self, raw: Any) -> tuple[Any, dict[str, Any]]:
        if not isinstance(raw, dict):
            raise InvalidMessage(
                "Did not find schema to validate request", cause="a request is a JSON object"
            )
        errors: list[tuple[int, str]] = []
        for plugin in self.plugins:
            try:
                return plugin, schemas.validate(plugin.schema, raw)
            except InvalidMessage as exc:
                errors.append((_closeness(plugin.schema, raw), exc.cause or exc.message))
        cause = max(errors)[1] if errors else "no plugin is enabled"
        raise InvalidMessage("Did not find schema to validate request", cause=cause)

    def _reject(self, batch: Batch, raw: Any, origin: Origin, message: str, cause: str | None) -> None:
        batch.failed += 1
        log.warning(
            message,
            extra={
                "parsed": isinstance(raw, dict),
                "valid": False,
                "cause": cause,
                "data": raw,
                "origin": origin.id,
            },
        )
        batch.answers.append(answers.error_answer(raw, message, cause))
        batch.dead_letters.append(
            answers.dead_letter(
                raw,
                f"{message}: {cause}",
                "kafka-monitor",
                topic=origin.topic,
                partition=origin.partition,
                offset=origin.offset,
            )
        )

    def _write(self, batch: Batch) -> None:
        if not batch.requests and not batch.commands:
            return
        pipe = self.redis.pipeline(transaction=False)
        self.frontier.enqueue_in(pipe, batch.requests)
        for command in batch.commands:
            command(pipe)
        pipe.execute()

    def _write_with_retry(self, batch: Batch, stop: threading.Event | None) -> None:
        delay = 0.1
        paused = False
        while True:
            try:
                self._write(batch)
                break
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as exc:
                if not paused:
                    self.consumer.pause(*self.consumer.assignment())
                    paused = True
                log.error(
                    "Redis unavailable; batch kept, retrying",
                    extra={"error": str(exc), "retry_in": delay, "messages": batch.total},
                )
                self.consumer.poll(timeout_ms=int(delay * 1000))  # keeps the group membership alive
                if stop is not None and stop.is_set() and delay >= MAX_BACKOFF:
                    raise
                delay = min(delay * 2, MAX_BACKOFF)
        if paused:
            self.consumer.resume(*self.consumer.paused())
            log.info("Redis is back; resuming", extra={"messages": batch.total})

    def _send(self, batch: Batch) -> None:
        appid_topics = self.settings.get_bool("KAFKA_APPID_TOPICS")
        for answer in batch.answers:
            payload = answers.encode(answer)
            self.producer.send(self.outbound_topic, payload)
            if appid_topics and answer.get("appid"):
                self.producer.send(self.settings.topic(f"outbound_{answer['appid']}"), payload)
        for letter in batch.dead_letters:
            self.producer.send(self.dead_letter_topic, answers.encode(letter))
        if batch.answers or batch.dead_letters:
            self.producer.flush(timeout=30)

    def _commit(self, records: list[ConsumerRecord]) -> None:
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            offsets[tp] = OffsetAndMetadata(record.offset + 1, "", -1)
        self.consumer.commit(offsets)


def _decode(value: bytes | None) -> Any:
    if value is None:
        raise InvalidMessage("Unparseable JSON Received", cause="empty message")
    try:
        return ujson.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidMessage("Unparseable JSON Received", cause=str(exc)) from exc


def _closeness(schema_name: str, raw: dict[str, Any]) -> int:
    """How many of a schema's required fields a message has: the best guess of what it meant."""
    required = schemas.schema(schema_name).get("required", [])
    return sum(1 for name in required if name in raw)
