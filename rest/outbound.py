"""The gateway's one producer, and its one consumer of the outbound firehose.

The consumer has no group, so every gateway sees every answer (Scrapy Cluster's design): an answer
a request of this gateway waits for goes to that request; any other answer with a uuid is kept in
Redis as `rest:poll:<uuid>` for REST_POLL_RESULT_TTL seconds, so /poll on any gateway finds it.
Both clients are made in a background thread that retries until the broker answers, so the
gateway starts (and reports YELLOW) while Kafka is down.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import ujson
from kafka import KafkaConsumer, KafkaProducer

from rest.kafka_io import broker_reachable, consumer_at_end
from rest.waiters import Waiters
from utils.config.clients import RedisClient, ensure_topics, kafka_producer
from utils.config.settings import Settings
from utils.frontier import keys

log = logging.getLogger(__name__)

RECENT_ERRORS = 50  # error answers kept for the dashboard
MAX_BACKOFF = 10.0  # seconds between two attempts to connect to Kafka


class KafkaUnavailable(Exception):
    """The request could not be handed to Kafka."""


class Outbound:
    def __init__(self, settings: Settings, redis: RedisClient) -> None:
        self.settings = settings
        self.redis = redis
        self.topic = settings.topic("outbound_firehose")
        self.waiters = Waiters()
        self.recent_errors: collections.deque[dict[str, Any]] = collections.deque(maxlen=RECENT_ERRORS)
        self.producer: KafkaProducer | None = None
        self.consumer: KafkaConsumer | None = None
        self.on_ready: Callable[[], None] | None = None  # called once both clients exist
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outbound-consumer", daemon=True)

    @property
    def ready(self) -> bool:
        """Both clients exist and the consumer is positioned."""
        return self.producer is not None and self.consumer is not None

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.producer is not None:
            self.producer.close(timeout=5)

    # --- sending ----------------------------------------------------------------------------
    async def send(self, message: dict[str, Any]) -> None:
        """Hand `message` to the incoming topic and wait for the broker's confirmation."""
        producer = self.producer
        if producer is None:
            raise KafkaUnavailable("not connected")
        loop = asyncio.get_running_loop()
        confirmed: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if confirmed.done():
                return
            if error is None:
                confirmed.set_result(None)
            else:
                confirmed.set_exception(KafkaUnavailable(str(error)))

        payload = ujson.dumps(message, ensure_ascii=False, escape_forward_slashes=False).encode()
        try:
            future = await asyncio.to_thread(producer.send, self.settings.incoming_topic, payload)
        except Exception as exc:  # metadata timeout, buffer full, closed producer
            raise KafkaUnavailable(str(exc)) from exc
        future.add_callback(lambda _meta: loop.call_soon_threadsafe(settle, None))
        future.add_errback(lambda exc: loop.call_soon_threadsafe(settle, exc))
        try:
            await asyncio.wait_for(confirmed, self.settings.get_float("KAFKA_FEED_TIMEOUT"))
        except TimeoutError as exc:
            raise KafkaUnavailable("no confirmation from the broker") from exc

    # --- consuming --------------------------------------------------------------------------
    def _run(self) -> None:
        self._connect()
        while not self._stop.is_set() and self.consumer is not None:
            try:
                polled = self.consumer.poll(timeout_ms=500)
            except Exception:
                log.exception("Kafka consumer failed; reconnecting")
                self._reconnect()
                continue
            records = [record for part in polled.values() for record in part]
            if records:
                self.dispatch(record.value for record in records)
        if self.consumer is not None:
            self.consumer.close()

    def _connect(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                if broker_reachable(self.settings):
                    ensure_topics(self.settings, [self.settings.incoming_topic])
                    self.consumer = consumer_at_end(self.settings, self.topic)
                    self.producer = kafka_producer(self.settings)
                    log.info("Connected successfully to Kafka", extra={"topic": self.topic})
                    if self.on_ready is not None:
                        self.on_ready()
                    return
            except Exception as exc:
                log.warning("Couldn't connect to Kafka", extra={"error": str(exc), "retry_in": delay})
            self._stop.wait(delay)
            delay = min(delay * 2, MAX_BACKOFF)

    def _reconnect(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            consumer.close()
        self._connect()

    def dispatch(self, values: Any) -> None:
        """Route each answer to its waiting request or to Redis for /poll."""
        unclaimed: list[tuple[str, bytes]] = []
        for value in values:
            message = _decode(value)
            if message is None:
                continue
            if message.get("action") == "error":
                self.recent_errors.appendleft({"received": time.time(), **message})
            uuid = message.get("uuid")
            if isinstance(uuid, str) and not self.waiters.deliver(uuid, message):
                unclaimed.append((uuid, value))
        if unclaimed:
            self._store(unclaimed)

    def _store(self, unclaimed: list[tuple[str, bytes]]) -> None:
        ttl = self.settings.get_int("REST_POLL_RESULT_TTL")
        try:
            pipe = self.redis.pipeline(transaction=False)
            for uuid, value in unclaimed:
                pipe.set(keys.rest_poll(uuid), value, ex=ttl)
            pipe.execute()
        except Exception as exc:
            log.error("Unable to send result to redis", extra={"error": str(exc), "results": len(unclaimed)})


def _decode(value: bytes | None) -> dict[str, Any] | None:
    try:
        message = ujson.loads(value or b"")
    except ValueError:
        log.warning("Unparseable JSON Received from kafka", extra={"data": (value or b"")[:200]})
        return None
    return message if isinstance(message, dict) else None
