"""Answers and dead letters of a batch, confirmed by the broker before its offsets are committed."""

from __future__ import annotations

from kafka import KafkaProducer

from kafka_monitor.batch import Batch
from utils.config.settings import Settings
from utils.schemas import answers

SEND_TIMEOUT = 30.0  # seconds the answers of a batch may take to be confirmed


class Outbound:
    """`<prefix>.outbound_firehose` (and `outbound_<appid>` when enabled) and `<prefix>.dead_letter`."""

    def __init__(self, producer: KafkaProducer, settings: Settings) -> None:
        self.producer = producer
        self.settings = settings
        self.outbound_topic = settings.topic("outbound_firehose")
        self.dead_letter_topic = settings.topic("dead_letter")

    def send(self, batch: Batch) -> None:
        """Send and wait; raises the first KafkaError (then the batch is read again, not committed)."""
        futures = []
        for answer in batch.answers:
            payload = answers.encode(answer)
            futures.append(self.producer.send(self.outbound_topic, payload))
            per_appid = self.settings.appid_topic("outbound", answer.get("appid"))
            if per_appid is not None:
                futures.append(self.producer.send(per_appid, payload))
        for letter in batch.dead_letters:
            futures.append(self.producer.send(self.dead_letter_topic, answers.encode(letter)))
        if futures:
            self.producer.flush(timeout=SEND_TIMEOUT)
            for future in futures:
                future.get(timeout=0)

    def close(self) -> None:
        self.producer.flush(timeout=10)
        self.producer.close(timeout=10)
