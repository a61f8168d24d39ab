"""How the pipeline tells the scheduler that a leased request is done (and the downloader, that
one is being fetched).

A direct callback on the crawler instead of a Scrapy signal: `send_catch_log` costs a dispatcher
walk per page, which showed up in profiles of the per-page path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_ATTRIBUTE = "_shoal_lease_settled"


def connect_settled(crawler: Any, callback: Callable[..., None]) -> None:
    """The scheduler's hook: called with `lease`, `outcome` and `details` when a lease ends."""
    setattr(crawler, _ATTRIBUTE, callback)


def lease_settled(crawler: Any, lease: Any, outcome: str, details: dict[str, Any]) -> None:
    """Sent by the pipeline once a page is confirmed on Kafka, or a try ended without one."""
    callback = getattr(crawler, _ATTRIBUTE, None)
    if callback is not None:
        callback(lease, outcome, details)


_FETCHED = "_shoal_lease_fetched"


def connect_fetched(crawler: Any, callback: Callable[..., None]) -> None:
    """The scheduler's hook: called with `lease` and `at` (unix s) when a leased request is fetched."""
    setattr(crawler, _FETCHED, callback)


def lease_fetched(crawler: Any, lease: Any, at: float) -> None:
    """Sent by the downloader middleware as a leased request goes to the network."""
    callback = getattr(crawler, _FETCHED, None)
    if callback is not None:
        callback(lease, at)


_ROBOTS = "_shoal_robots_fetched"


def connect_robots(crawler: Any, callback: Callable[[dict[str, Any]], None]) -> None:
    """The Kafka pipeline's hook: called with the message of each robots.txt fetch (crawler/robots.py)."""
    setattr(crawler, _ROBOTS, callback)


def robots_fetched(crawler: Any, message: dict[str, Any]) -> None:
    """Sent by the robots archive middleware when a robots.txt answer comes back."""
    callback = getattr(crawler, _ROBOTS, None)
    if callback is not None:
        callback(message)
