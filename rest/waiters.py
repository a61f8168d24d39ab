"""Requests waiting for their answer on the outbound firehose, keyed by uuid.

Scrapy Cluster busy-spun a thread per waiting request and leaked an entry per timed-out uuid.
Here a waiting request awaits an asyncio event that the consumer thread sets; both sides touch
the registry under one lock, so an answer arriving as the wait times out is either handed to
the request or left for the caller to store for /poll, never lost.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Waiter:
    loop: asyncio.AbstractEventLoop
    event: asyncio.Event = field(default_factory=asyncio.Event)
    message: dict[str, Any] | None = None
    users: int = 1


class Waiters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_uuid: dict[str, Waiter] = {}

    def __len__(self) -> int:
        return len(self._by_uuid)

    def register(self, uuid: str) -> Waiter:
        """Called on the event loop before the request is sent; the same uuid twice shares one."""
        with self._lock:
            waiter = self._by_uuid.get(uuid)
            if waiter is None:
                waiter = self._by_uuid[uuid] = Waiter(asyncio.get_running_loop())
            else:
                waiter.users += 1
            return waiter

    def deliver(self, uuid: str, message: dict[str, Any]) -> bool:
        """Called by the consumer thread; False when nobody waits (the caller stores it for /poll)."""
        with self._lock:
            waiter = self._by_uuid.get(uuid)
            if waiter is None or waiter.message is not None:
                return False
            waiter.message = message
        waiter.loop.call_soon_threadsafe(waiter.event.set)
        return True

    async def wait(self, uuid: str, waiter: Waiter, timeout: float) -> dict[str, Any] | None:
        """The answer, or None after `timeout` seconds; the registration ends either way."""
        try:
            await asyncio.wait_for(waiter.event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self.release(uuid, waiter)
        return waiter.message

    def release(self, uuid: str, waiter: Waiter) -> None:
        with self._lock:
            waiter.users -= 1
            if waiter.users <= 0 and self._by_uuid.get(uuid) is waiter:
                del self._by_uuid[uuid]
