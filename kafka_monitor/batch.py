"""What one poll of the incoming topic turns into: Redis writes, answers and dead letters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from utils.frontier import NewRequest


@dataclass(frozen=True)
class Origin:
    """Where a message came from; its offset makes every write of it idempotent on replay."""

    topic: str
    partition: int
    offset: int

    @property
    def id(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


@dataclass
class Batch:
    """Everything a batch writes; the Redis part goes out in one pipeline before any answer."""

    requests: list[NewRequest] = field(default_factory=list)
    commands: list[Callable[[Any], None]] = field(default_factory=list)  # each gets the pipeline
    answers: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    log_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # after the write
    handled: dict[str, int] = field(default_factory=dict)  # plugin name -> messages
    failed: int = 0
    total: int = 0

    def count(self, plugin: str) -> None:
        self.handled[plugin] = self.handled.get(plugin, 0) + 1
