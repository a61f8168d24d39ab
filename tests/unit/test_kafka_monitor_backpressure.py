"""Backpressure decisions: pause at a high-water mark, resume below the low one, at most once a second."""

from __future__ import annotations

import logging

import pytest
import redis

from kafka_monitor.backpressure import Backpressure, Marks
from utils.config.settings import Settings
from utils.observability.metrics import configure_process
from utils.observability.metrics.record import unreachable_dependencies
from utils.observability.metrics.registry import STATE


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Readings:
    """What Redis would answer; the test sets it."""

    def __init__(self, **values: int) -> None:
        self.values = values
        self.calls = 0

    def __call__(self) -> dict[str, int]:
        self.calls += 1
        return dict(self.values)


OFF = Marks()


def make(readings: Readings, memory: Marks | None = None, backlog: Marks = OFF) -> tuple[Backpressure, Clock]:
    clock = Clock()
    return Backpressure(readings, memory, backlog, interval=1.0, clock=clock), clock


def test_marks_default_the_low_water_mark_to_80_percent() -> None:
    assert Marks.of(1000, 0) == Marks(1000, 800)
    assert Marks.of(1000, 900) == Marks(1000, 900)
    assert not Marks.of(0, 0).on


def test_backlog_pauses_at_high_water_and_resumes_only_below_low_water(caplog: pytest.LogCaptureFixture) -> None:
    readings = Readings(used_memory=10, maxmemory=0, backlog=50)
    bp, clock = make(readings, backlog=Marks(100, 60))
    caplog.set_level(logging.INFO, logger="kafka_monitor.backpressure")
    assert bp.check() is False
    readings.values["backlog"] = 100
    clock.now += 1
    assert bp.check() is True
    assert bp.state()["backpressure"] == "paused" and bp.state()["backpressure_reason"] == "backlog"  # noqa: PT018
    readings.values["backlog"] = 70  # under high, not under low: stays paused
    clock.now += 1
    assert bp.check() is True
    readings.values["backlog"] = 59
    clock.now += 3
    assert bp.check() is False
    state = bp.state()
    assert state["backpressure"] == "running" and state["backpressure_pauses"] == 1  # noqa: PT018
    assert state["backpressure_paused_seconds"] == pytest.approx(4.0)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["Backpressure on: consumption paused", "Backpressure off: consumption resumed"]


def test_readings_are_taken_at_most_once_per_interval() -> None:
    readings = Readings(used_memory=10, maxmemory=0, backlog=0)
    bp, clock = make(readings, backlog=Marks(100, 60))
    for _ in range(5):
        bp.check()
    assert readings.calls == 1
    clock.now += 1.0
    bp.check()
    assert readings.calls == 2


def test_memory_mark_defaults_to_90_percent_of_maxmemory_and_is_off_without_one() -> None:
    readings = Readings(used_memory=900, maxmemory=1000)
    bp, clock = make(readings)
    assert bp.check() is True and bp.reason == "used_memory"  # noqa: PT018
    readings.values["used_memory"] = 719  # under 80 % of 900
    clock.now += 1
    assert bp.check() is False
    unlimited, _ = make(Readings(used_memory=10**12, maxmemory=0))
    assert unlimited.check() is False


def test_an_explicit_memory_mark_wins_and_both_measures_must_be_low_to_resume() -> None:
    readings = Readings(used_memory=500, maxmemory=0, backlog=10)
    bp, clock = make(readings, memory=Marks(500, 400), backlog=Marks(10, 5))
    assert bp.check() is True and bp.reason == "used_memory,backlog"  # noqa: PT018
    readings.values["used_memory"] = 100  # memory fine, backlog still high
    clock.now += 1
    assert bp.check() is True
    readings.values["backlog"] = 4
    clock.now += 1
    assert bp.check() is False


def test_a_check_that_cannot_reach_redis_reports_it_down_and_the_next_good_one_up() -> None:
    """An idle kafka monitor writes nothing else to Redis: its backpressure check is how its health
    learns that Redis is away (and back)."""
    readings = Readings(used_memory=10, maxmemory=0, backlog=0)
    answers: list[Exception | None] = [redis.ConnectionError("cut"), None]

    def measure() -> dict[str, int]:
        error = answers.pop(0)
        if error is not None:
            raise error
        return readings()

    before = STATE.component
    STATE.dependencies.clear()
    configure_process(Settings.load(environ={}), "kafka-monitor")
    try:
        clock = Clock()
        bp = Backpressure(measure, None, OFF, interval=1.0, clock=clock)
        bp.check()
        assert unreachable_dependencies() == ["redis"]
        clock.now += 1.0
        bp.check()
        assert unreachable_dependencies() == []
    finally:
        configure_process(Settings.load(environ={}), before)  # forgets this test's component and health
        STATE.dependencies.clear()
