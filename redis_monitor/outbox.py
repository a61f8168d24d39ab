"""Messages to Kafka, each tied to the job that produced it.

A job is acknowledged in the stream only once every message it produced is confirmed by the
broker, so a monitor that dies, or a broker that stalls, loses no answer: unconfirmed jobs stay
pending and are answered again. A send that failed is sent again on the next `settle`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.future import Future

from utils.config.settings import Settings
from utils.observability.metrics import record_produced, set_dependency_up
from utils.schemas import answers

log = logging.getLogger(__name__)


@dataclass
class _Send:
    topic: str
    value: bytes
    future: Any


class Outbox:
    def __init__(self, producer: KafkaProducer, settings: Settings) -> None:
        self.producer = producer
        self.settings = settings
        self._open: dict[str | None, list[_Send]] = defaultdict(list)  # job entry id (None: no job)

    def answer(self, message: dict[str, Any], job_id: str | None = None) -> None:
        """An answer or announcement: `<prefix>.outbound_firehose` (and `.outbound_<appid>`)."""
        self._fan_out("outbound", message, job_id)

    def page(self, message: dict[str, Any], job_id: str | None = None) -> None:
        """A page message: `<prefix>.crawled_firehose` (and `.crawled_<appid>`)."""
        self._fan_out("crawled", message, job_id)

    def dead_letter(self, record: dict[str, Any], job_id: str | None = None) -> None:
        self._send(self.settings.topic("dead_letter"), answers.encode(record), job_id)

    @property
    def waiting(self) -> set[str]:
        """Jobs whose messages are not all confirmed yet."""
        return {job for job in self._open if job is not None}

    def settle(self, timeout: float) -> set[str]:
        """Wait up to `timeout` s (0: not at all) for the broker; the jobs now fully confirmed."""
        if not self._open:
            return set()
        try:
            if timeout > 0:
                self.producer.flush(timeout=timeout)
        except KafkaTimeoutError:
            log.warning("Kafka did not confirm in time; answers kept", extra={"jobs": len(self.waiting)})
        confirmed = set()
        for job, sends in list(self._open.items()):
            if all(s.future.is_done and s.future.succeeded() for s in sends):
                for send in sends:
                    record_produced(send.topic, sent=True)
                set_dependency_up("kafka", True)
                del self._open[job]
                if job is not None:
                    confirmed.add(job)
                continue
            for send in sends:
                if send.future.is_done and send.future.failed():
                    error = str(send.future.exception)
                    log.error("Failed to send to Kafka; retrying", extra={"topic": send.topic, "error": error})
                    record_produced(send.topic, sent=False)
                    set_dependency_up("kafka", False)
                    send.future = self._produce(send.topic, send.value)
        return confirmed

    def close(self, timeout: float) -> None:
        self.settle(timeout)
        self.producer.close(timeout=timeout)

    def _fan_out(self, kind: str, message: dict[str, Any], job_id: str | None) -> None:
        value = answers.encode(message)
        self._send(self.settings.topic(f"{kind}_firehose"), value, job_id)
        per_appid = self.settings.appid_topic(kind, message.get("appid"))
        if per_appid is not None:
            self._send(per_appid, value, job_id)

    def _send(self, topic: str, value: bytes, job_id: str | None) -> None:
        self._open[job_id].append(_Send(topic, value, self._produce(topic, value)))

    def _produce(self, topic: str, value: bytes) -> Any:
        """The send's future; a send refused at once (no metadata) is a failed future, retried later."""
        try:
            return self.producer.send(topic, value)
        except KafkaError as exc:
            return Future().failure(exc)
