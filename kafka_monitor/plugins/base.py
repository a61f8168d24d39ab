"""The interface of a kafka monitor plugin (Scrapy Cluster's BaseHandler, as a Protocol).

A plugin names its JSON Schema (a file of utils/schemas, without `.json`, or a path of its own ending
in `.json`, relative to its module like Scrapy Cluster's PLUGIN_DIR) and handles the
messages valid against it by adding writes, answers and log events to the batch; it never talks
to Redis itself, so a whole batch costs one pipeline and a replay rewrites nothing twice.
Registered in KAFKA_MONITOR_PLUGINS (Scrapy Cluster's PLUGINS): `{"dotted.path.Class": rank}`.
"""

from __future__ import annotations

from typing import Any, Protocol

from kafka_monitor.batch import Batch, Origin


class Handler(Protocol):
    """Handles messages valid against `schema`; raising InvalidMessage rejects one (answered)."""

    schema: str
    rank: int

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        """Add the message's writes and answers to the batch; raise to reject the message."""


def stat_name(plugin: Any) -> str:
    """The name a plugin's stats are kept under: `stat_name`, else its class name (Scrapy Cluster's)."""
    return str(getattr(plugin, "stat_name", None) or type(plugin).__name__)


class EarlyRefusal(Protocol):
    """Optional: a plugin that can refuse a message before any schema checks it (a flood over its
    quota); it answers the message itself and returns True, else returns False and changes nothing."""

    def refuse_early(self, message: Any, batch: Batch) -> bool:
        """Whether the message was refused and answered."""
