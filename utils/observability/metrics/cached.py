"""A reading that a Prometheus collector makes at most once per period, shared by concurrent scrapes.

Collectors that read Redis or a broker at scrape time (the frontier's figures, the scaling signal,
consumer-group lag) would otherwise repeat the same reads for every Prometheus server that scrapes,
and at once when two scrape together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class CachedReading(Generic[T]):
    """`read()`'s value, made again only when the last one is `seconds` old (0: every time).

    `read` handles its own failures (returning what a failed reading means, e.g. None); what it
    returns is cached alike, so a source that is down is asked once a period, not once a scrape.
    """

    def __init__(self, read: Callable[[], T], seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.read = read
        self.seconds = seconds
        self.clock = clock
        self._cached: tuple[float, T] | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            now = self.clock()
            if self._cached is not None and now - self._cached[0] < self.seconds:
                return self._cached[1]
            value = self.read()
            self._cached = (now, value)
            return value
