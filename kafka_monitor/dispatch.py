"""Message -> plugin: parse, try the schemas in rank order, hand over; reject what fails.

Scrapy Cluster dropped what it could not handle, logging a warning, and died of a handler's
exception. Here every rejected message is logged with Scrapy Cluster's event and extras, answered
on the outbound topic (API.md "Fixed" 1) and kept on the dead-letter topic; nothing is raised.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

import ujson
from kafka.consumer.fetcher import ConsumerRecord

from kafka_monitor.batch import Batch, Origin, message_fingerprint
from kafka_monitor.plugins.base import stat_name
from kafka_monitor.validation import schema_source
from utils.config.errors import InvalidMessage
from utils.observability.metrics import record_dead_letter, record_incoming
from utils.schemas import answers
from utils.schemas.matching import Matcher

log = logging.getLogger(__name__)

NOT_JSON = "Unparseable JSON Received"
HANDLER_FAILED = "Handler failed"


class Dispatcher:
    """The enabled plugins, each with its compiled schema and stats name, in rank order."""

    def __init__(self, plugins: list[Any], source: str = "kafka-monitor") -> None:
        self.plugins = plugins
        self.source = source
        self._names = {id(p): stat_name(p) for p in plugins}
        self._matcher: Matcher[Any] = Matcher([(p, schema_source(p)) for p in plugins])

    @property
    def stat_names(self) -> list[str]:
        return [self._names[id(p)] for p in self.plugins]

    def process(self, records: Iterable[ConsumerRecord], batch: Batch) -> Batch:
        """Validate and dispatch every record into `batch`; a bad one is answered and dead-lettered."""
        for record in records:
            batch.total += 1
            fingerprint = message_fingerprint(record.timestamp, record.key, record.value)
            origin = Origin(record.topic, record.partition, record.offset, fingerprint)
            raw: Any = record.value
            try:
                raw = _decode(raw)
                plugin, name, message = self._match(raw)
                plugin.handle(message, origin, batch)
                batch.count(name)
            except InvalidMessage as exc:
                self._reject(batch, raw, origin, exc.message, exc.cause)
            except Exception as exc:  # a plugin's bug must not stop the monitor
                self._reject(batch, raw, origin, HANDLER_FAILED, f"{type(exc).__name__}: {exc}", failure=True)
        return batch

    def refuse(self, record: ConsumerRecord, batch: Batch, message: str, cause: str) -> None:
        """Answer and dead-letter one record that passed validation but that Redis refused alone."""
        batch.total += 1
        origin = Origin(record.topic, record.partition, record.offset)
        self._reject(batch, _decode(record.value), origin, message, cause)

    def _match(self, raw: Any) -> tuple[Any, str, dict[str, Any]]:
        plugin, message = self._matcher.match(raw)
        return plugin, self._names[id(plugin)], message

    def _reject(
        self, batch: Batch, raw: Any, origin: Origin, message: str, cause: str | None, failure: bool = False
    ) -> None:
        batch.failed += 1
        outcome = "failed" if failure else "invalid"
        record_incoming("unknown", outcome)  # the rare path: counted per message
        record_dead_letter(outcome)
        answer = answers.error_answer(raw, message, cause)
        batch.answers.append(answer)
        parsed = not isinstance(raw, bytes | None)
        extra = {"parsed": parsed, "valid": False, "cause": cause, "data": answer["data"], "origin": origin.id}
        log.log(logging.ERROR if failure else logging.WARNING, message, extra=extra, exc_info=failure)
        letter = answers.dead_letter(
            raw, f"{message}: {cause}" if cause else message, self.source,
            topic=origin.topic, partition=origin.partition, offset=origin.offset,
        )  # fmt: skip
        batch.dead_letters.append(letter)


# What ujson accepts but breaks a later step of the whole batch (the UTF-8 encoding of an answer or a
# Redis command): a lone surrogate, escaped (\\ud800-\\udfff) or as raw bytes, or NaN / Infinity, which
# no JSON consumer reads. Plain substring tests (C speed, no regex): only a message holding one is walked.
_SUSPECT = (b"\\ud", b"\\uD", b"\xed", b"NaN", b"Infinity")


def _decode(value: bytes | None) -> Any:
    if value is None:
        raise InvalidMessage(NOT_JSON, cause="empty message")
    try:
        parsed = ujson.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidMessage(NOT_JSON, cause=str(exc)) from None
    if any(marker in value for marker in _SUSPECT):
        _check_clean(parsed)
    return parsed


def _check_clean(value: Any) -> None:
    """Refuse what would break a later step of the whole batch: Redis, the answer's encoding, a float."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMessage(NOT_JSON, cause="lone surrogate in a string") from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMessage(NOT_JSON, cause="NaN or infinite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_clean(key)
            _check_clean(item)
    elif isinstance(value, list):
        for item in value:
            _check_clean(item)
