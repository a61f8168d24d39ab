"""One blocking call at a time in the reactor's thread pool, with its answer handed back in the reactor.

The scheduler's settle-and-pop is a Redis round trip (about 1 ms, more on a Redis Cluster): made in
the reactor, it stops every download and parse meanwhile. Here it runs in a thread; `finish_now`
waits for it when the spider closes, so no lease it took is left unaccounted for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from twisted.internet import threads

WAIT_ON_CLOSE = 15.0  # seconds close() waits for a running call


class Fetch:
    def __init__(self) -> None:
        self.running = False
        self._done = threading.Event()
        self._answer: tuple[Any, Any, BaseException | None] | None = None  # (context, result, error)
        self._deliver: Callable[[Any, Any, BaseException | None], None] | None = None

    def start(self, call: Callable[[], Any], context: Any, deliver: Callable[[Any, Any, BaseException | None], None]):
        """Run `call` in a thread; `deliver(context, result, error)` runs in the reactor afterwards."""
        self.running, self._answer, self._deliver = True, None, deliver
        self._done.clear()

        def work() -> None:
            try:
                self._answer = (context, call(), None)
            except BaseException as exc:  # noqa: BLE001 - handed to deliver, never lost
                self._answer = (context, None, exc)
            self._done.set()

        threads.deferToThread(work).addBoth(lambda _: self._hand_over())

    def finish_now(self, timeout: float = WAIT_ON_CLOSE) -> None:
        """Wait for a running call and deliver its answer at once (the spider is closing)."""
        if self.running:
            self._done.wait(timeout)
            self._hand_over()

    def _hand_over(self) -> None:
        answer, deliver = self._answer, self._deliver
        if answer is None or deliver is None:
            return  # delivered already (finish_now), or still running past the close timeout
        self._answer, self.running = None, False
        deliver(*answer)
