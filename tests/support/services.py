"""Small helpers for tests that wait on real services instead of sleeping a fixed time."""

from __future__ import annotations

import reprlib
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from utils.services import ServiceError

T = TypeVar("T")

# Seconds a test's broker, ZooKeeper and Redis get to answer together. The wait ends as soon as they
# answer (about 10 s on a quiet machine); at a load of 30 a broker took 50-86 s, and the 90 s default
# of start_local_services, which also pays for formatting the broker's log, failed whole modules.
SERVICE_START_TIMEOUT = 240


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = 0.05, message: str = "") -> T:
    """Poll `predicate` until it returns something truthy and return that; AssertionError on timeout.

    The predicate is checked once more after the deadline, so a slow last poll still counts. The
    AssertionError says what was awaited (`message`, else the predicate) and what the last poll saw.
    """
    deadline = time.monotonic() + timeout
    polls = 0
    while True:
        result = predicate()
        polls += 1
        if result:
            return result
        if time.monotonic() >= deadline:
            awaited = message or f"condition not met: {predicate!r}"
            seen = reprlib.repr(result)
            raise AssertionError(f"{awaited} (waited {timeout:g} s, {polls} polls; the last returned {seen})")
        time.sleep(interval)


def started_or_fail(start: Callable[[], T], what: str) -> T:
    """`start()`'s result, or the test session fails with why `what` did not start (the failing
    service's log tail is in the ServiceError), without a chained traceback to read past."""
    try:
        return start()
    except ServiceError as exc:
        failure = f"{what} did not start:\n{exc}"
    pytest.fail(failure, pytrace=False)
