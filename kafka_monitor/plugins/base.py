"""The interface of a kafka monitor plugin."""

from __future__ import annotations

from typing import Any, Protocol

from kafka_monitor.batch import Batch, Origin


class Handler(Protocol):
    """Handles messages valid against `schema` (a file name in utils/schemas, without .json)."""

    schema: str
    rank: int

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        """Add the message's writes and answers to the batch; raise to reject the message."""
