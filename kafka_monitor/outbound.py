"""Answers and dead letters of a batch, confirmed by the broker before its offsets are committed."""

from __future__ import annotations

import logging
from typing import Any

from kafka import KafkaProducer
from kafka.errors import (
    CorruptRecordError,
    InvalidTopicError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)

from kafka_monitor.batch import Batch
from utils.config.settings import Settings
from utils.schemas import answers

log = logging.getLogger(__name__)

SEND_TIMEOUT = 30.0  # seconds the answers of a batch may take to be confirmed
# Refusals of one message, not of the service: logged and dropped, never retried with the batch
# (retrying would read the partition's batch again forever, issue 30).
ONE_MESSAGE = (MessageSizeTooLargeError, RecordListTooLargeError, CorruptRecordError, InvalidTopicError)


class Outbound:
    """`<prefix>.outbound_firehose` (and `outbound_<appid>` when enabled) and `<prefix>.dead_letter`."""

    def __init__(self, producer: KafkaProducer, settings: Settings) -> None:
        self.producer = producer
        self.settings = settings
        self.outbound_topic = settings.topic("outbound_firehose")
        self.dead_letter_topic = settings.topic("dead_letter")

    def send(self, batch: Batch) -> None:
        """Send and wait; raises the first KafkaError (then the batch is read again, not committed)."""
        futures: list[Any] = []
        for answer in batch.answers:
            payload = answers.encode(answer)
            futures.append(self._send(self.outbound_topic, payload))
            per_appid = self.settings.appid_topic("outbound", answer.get("appid"))
            if per_appid is not None:
                futures.append(self._send(per_appid, payload))
        for letter in batch.dead_letters:
            futures.append(self._send(self.dead_letter_topic, answers.encode(letter)))
        if futures:
            self.producer.flush(timeout=SEND_TIMEOUT)
            for future in futures:
                if future is not None:
                    _confirmed(future)

    def _send(self, topic: str, payload: bytes) -> Any:
        """The send's future, or None when the producer refused this one message at once (logged)."""
        try:
            return self.producer.send(topic, payload)
        except ONE_MESSAGE as exc:
            log.error("Answer refused by the producer; dropped", extra={"topic": topic, "size": len(payload),
                                                                        "error": repr(exc)})  # fmt: skip
            return None

    def close(self) -> None:
        self.producer.flush(timeout=10)
        self.producer.close(timeout=10)


def _confirmed(future: Any) -> None:
    """Raise the send's KafkaError, unless it refused this one message (then it is logged)."""
    try:
        future.get(timeout=0)
    except ONE_MESSAGE as exc:
        log.error("Answer refused by the broker; dropped", extra={"error": repr(exc)})
