"""What one poll of the incoming topic turns into: Redis writes, answers and dead letters."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_monitor.batch_log import LogEvent
from utils.config.redact import redact_secrets
from utils.frontier import NewRequest

Command = Callable[[Any], None]  # adds its Redis commands to the batch's pipeline


@dataclass(frozen=True)
class Origin:
    """Where a message came from and what it was: together they make every write of it idempotent
    on replay, and only on replay. An offset alone outlives its log (a broker started afresh, a
    topic recreated, another cluster): a new message at an old offset has another fingerprint."""

    topic: str
    partition: int
    offset: int
    fingerprint: str = ""  # message_fingerprint() of the record

    @property
    def id(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"

    @property
    def identity(self) -> str:
        """The message: its place and its fingerprint (the jobs' replay marker)."""
        return f"{self.id}/{self.fingerprint}"


def message_fingerprint(timestamp: int | None, key: bytes | str | None, value: bytes | str | None) -> str:
    """16 hex digits of BLAKE2b over the record's timestamp, key and value: a replay reads the same
    record from the log; the same bytes sent again get another timestamp (milliseconds)."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(str(timestamp).encode())
    for part in (key, value):
        if isinstance(part, str):
            part = part.encode()
        digest.update(b"\x00" if part is None else b"\x01%d:" % len(part) + part)
    return digest.hexdigest()


@dataclass
class Batch:
    """Everything a batch writes; the Redis part goes out in one pipeline before any answer.

    `verbose` is whether INFO is logged (the batch's "Added ... to Redis" lines, counted per appid
    and crawlid: kafka_monitor/batch_log.py), `detailed` whether DEBUG is (Scrapy Cluster's line per
    message, with its fields: built only then, it costs more than validating the message). `ts` is
    Scrapy Cluster's `ts` field, one reading per batch.
    """

    verbose: bool = True
    detailed: bool = False
    ts: float = field(default_factory=lambda: round(time.time(), 3))
    requests: list[NewRequest] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    answer_of: dict[int, dict[str, Any]] = field(default_factory=dict)  # request index -> its acknowledgement
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    log_events: list[LogEvent] = field(default_factory=list)  # logged after the commit
    handled: dict[str, int] = field(default_factory=dict)  # plugin stats name -> messages
    failed: int = 0
    total: int = 0

    def absorb(self, other: Batch) -> None:
        """Add a one-message batch's outcome (the isolation step rebuilds a batch message by message)."""
        for index, answer in other.answer_of.items():
            self.answer_of[len(self.requests) + index] = answer
        self.requests += other.requests
        self.commands += other.commands
        self.answers += other.answers
        self.dead_letters += other.dead_letters
        self.log_events += other.log_events
        for name, n in other.handled.items():
            self.handled[name] = self.handled.get(name, 0) + n
        self.failed += other.failed

    def mark(self) -> tuple[int, ...]:
        """Where the batch stands, for `rollback` (a message that failed half-way leaves nothing)."""
        return len(self.requests), len(self.commands), len(self.answers), len(self.dead_letters), len(self.log_events)

    def rollback(self, mark: tuple[int, ...]) -> None:
        """Drop what was added since `mark` (a plugin that raised after adding some of its writes)."""
        requests, commands, answers, dead_letters, log_events = mark
        del self.requests[requests:], self.commands[commands:], self.answers[answers:]
        del self.dead_letters[dead_letters:], self.log_events[log_events:]
        for index in [i for i in self.answer_of if i >= requests]:
            del self.answer_of[index]

    def emptied(self) -> Batch:
        """A batch like this one (same ts and verbosity) with nothing in it."""
        return Batch(verbose=self.verbose, detailed=self.detailed, ts=self.ts)

    def acknowledge(self, answer: dict[str, Any]) -> None:
        """Answer the request just added once it is written: "queued", or why it was not."""
        self.answer_of[len(self.requests) - 1] = answer
        self.answers.append(answer)

    def settle_answers(self, statuses: list[str]) -> None:
        """Each acknowledgement says what the enqueue did: "queued" for a request queued now or by an
        earlier write of the very same message (a replay), else "dropped" with the reason."""
        for index, answer in self.answer_of.items():
            status = statuses[index] if index < len(statuses) else "queued"
            if status not in ("queued", "replayed"):
                answer["status"], answer["reason"] = "dropped", status

    def count(self, plugin: str) -> None:
        self.handled[plugin] = self.handled.get(plugin, 0) + 1

    def log(self, event: str, message: dict[str, Any]) -> None:
        """Scrapy Cluster's success event, counted in the batch's line; at DEBUG also the message's own
        line (the request plus parsed/valid). Null defaults are left out of it (a fifth of its cost)."""
        if not self.verbose:
            return
        fields = None
        if self.detailed:
            fields = {k: v for k, v in redact_secrets(message).items() if v is not None}
            fields.update(parsed=True, valid=True)
        self.log_events.append((event, message.get("appid"), message.get("crawlid"), fields))
