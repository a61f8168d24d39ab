"""Message -> plugin: parse, try the schemas in rank order, hand over; reject what fails.

Scrapy Cluster dropped what it could not handle, logging a warning, and died of a handler's
exception. Here every message passes one boundary (`_one`): whatever it raises, in parsing,
validation, a plugin or redaction, that message alone is answered on the outbound topic (API.md
"Fixed" 1) and kept on the dead-letter topic, and the batch goes on. Rejecting never raises either
(issue 30: a rejection that raised stopped the partition for good): its last resort is a minimal
answer and dead letter, and a logged error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord

from kafka_monitor.batch import Batch, Origin, message_fingerprint
from kafka_monitor.plugins.base import stat_name
from kafka_monitor.validation import schema_source
from utils.config.errors import InvalidMessage, last_line
from utils.observability.metrics import record_dead_letter, record_incoming
from utils.schemas import answers, wire
from utils.schemas.matching import Matcher

log = logging.getLogger(__name__)

NOT_JSON = wire.NOT_JSON
HANDLER_FAILED = "Handler failed"


class Dispatcher:
    """The enabled plugins, each with its compiled schema and stats name, in rank order."""

    def __init__(self, plugins: list[Any], source: str = "kafka-monitor") -> None:
        self.plugins = plugins
        self.source = source
        self._names = {id(p): stat_name(p) for p in plugins}
        self._matcher: Matcher[Any] = Matcher([(p, schema_source(p)) for p in plugins])
        self._early = [p for p in plugins if callable(getattr(p, "refuse_early", None))]

    @property
    def stat_names(self) -> list[str]:
        return [self._names[id(p)] for p in self.plugins]

    def process(self, records: Iterable[ConsumerRecord], batch: Batch) -> Batch:
        """Validate and dispatch every record into `batch`; a bad one is answered and dead-lettered.

        Never raises for a message: the one boundary of the kafka monitor's per-message work."""
        for record in records:
            batch.total += 1
            mark = batch.mark()
            raw: Any = getattr(record, "value", None)
            parsed: Any = None
            try:
                parsed = wire.parse(raw)
                reason = wire.refusal(parsed)
                if reason is not None:
                    raise InvalidMessage(NOT_JSON, cause=reason)
                raw = parsed
                self._dispatch(record, raw, batch)
            except InvalidMessage as exc:
                batch.rollback(mark)
                self._reject(batch, raw, _origin(record), exc.message, exc.cause, named=parsed)
            except Exception as exc:  # any plugin's bug, any input: this message alone fails
                batch.rollback(mark)
                self._reject(batch, raw, _origin(record), HANDLER_FAILED, last_line(exc), failure=True, named=parsed)
        return batch

    def refuse(self, record: ConsumerRecord, batch: Batch, message: str, cause: str) -> None:
        """Answer and dead-letter one record that passed validation but that Redis refused alone."""
        batch.total += 1
        raw: Any = record.value
        try:
            raw = wire.loads(raw)
        except Exception:  # shown as the bytes it was
            log.debug("Refused record shown as bytes", extra={"origin": _origin(record).id})
        self._reject(batch, raw, _origin(record), message, cause)

    def _dispatch(self, record: ConsumerRecord, parsed: Any, batch: Batch) -> None:
        for plugin in self._early:  # e.g. a flood over its quota: answered before any schema
            if plugin.refuse_early(parsed, batch):
                batch.count(self._names[id(plugin)])
                return
        origin = Origin(record.topic, record.partition, record.offset,
                        message_fingerprint(record.timestamp, record.key, record.value))  # fmt: skip
        plugin, message = self._matcher.match(parsed)
        plugin.handle(message, origin, batch)
        batch.count(self._names[id(plugin)])

    def _reject(
        self,
        batch: Batch,
        raw: Any,
        origin: Origin,
        message: str,
        cause: str | None,
        failure: bool = False,
        named: Any = None,
    ) -> None:
        """Answer, dead-letter and log one message; never raises (the last resort leaves its data out).

        `named`: the message as parsed, when its values were refused: its uuid and appid still name
        the requester in the answer."""
        batch.failed += 1
        outcome = "failed" if failure else "invalid"
        try:
            answer = {**answers.error_answer(raw, message, cause), **wire.names(named)}
            letter = answers.dead_letter(
                raw, f"{message}: {cause}" if cause else message, self.source,
                topic=origin.topic, partition=origin.partition, offset=origin.offset,
            )  # fmt: skip
        except Exception:
            log.exception("Rejection could not be built in full; sent without the message", extra={"origin": origin.id})
            answer, letter = _minimal(message, cause, self.source, origin)
        batch.answers.append(answer)
        batch.dead_letters.append(letter)
        try:
            record_incoming("unknown", outcome)  # the rare path: counted per message
            record_dead_letter(outcome)
            parsed = not isinstance(raw, bytes | None)
            extra = {"parsed": parsed, "valid": False, "cause": cause, "data": answer["data"], "origin": origin.id}
            log.log(logging.ERROR if failure else logging.WARNING, message, extra=extra, exc_info=failure)
        except Exception:
            log.exception("Rejection could not be logged in full", extra={"origin": origin.id})


def _origin(record: Any) -> Origin:
    """Where a record came from, for its answer; placeholders for what a broken record lacks."""
    topic, partition, offset = (getattr(record, name, None) for name in ("topic", "partition", "offset"))
    return Origin(
        topic if isinstance(topic, str) else "?",
        partition if isinstance(partition, int) else -1,
        offset if isinstance(offset, int) else -1,
    )


def _minimal(message: str, cause: str | None, source: str, origin: Origin) -> tuple[dict[str, Any], dict[str, Any]]:
    """An answer and a dead letter built from plain strings only: what remains when the full ones failed."""
    error = {"message": str(message)[: answers.TEXT_LIMIT], "cause": str(cause)[: answers.TEXT_LIMIT]}
    answer = {"action": "error", "error": error, "server_time": int(time.time()), "data": answers.NOT_SHOWN}
    letter = {"data": answers.NOT_SHOWN, "error": f"{error['message']}: {error['cause']}", "source": source,
              "timestamp": time.time(), "topic": origin.topic, "partition": origin.partition,
              "offset": origin.offset}  # fmt: skip
    return answer, letter
