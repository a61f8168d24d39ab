"""The dashboard's alert conditions held over time, and the three that Kafka tells (issue 33).

A condition of docker/prometheus/alerts.yml is "pending" from the first refresh that finds it until
it has held its rule's `for:`, then "firing", as Prometheus shows them; one that stops holding is
forgotten (Prometheus resets it too). From Kafka: ShoalDeadLettersGrowing counts the dead-letter
topic's records of the last window by their timestamps (offsets_for_times against the end offsets:
no record is read); the two lag alerts read the groups' committed lag (group_lag.py), "growing"
being the least-squares slope of this gateway's readings of the last window (Prometheus' deriv).
Thresholds, windows and `for:` are the ALERT_* settings and FOR_SECONDS, which
tests/unit/test_alert_rules.py checks against alerts.yml. State is per gateway process, in memory.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from utils.config.settings import Settings
from utils.observability.metrics.cached import CachedReading
from utils.observability.metrics.group_lag import lag_groups, read_group_lag

log = logging.getLogger(__name__)

FOR_SECONDS = {  # the `for:` of the conditions read from Redis (rest/pushback.py)
    "ShoalCrawlNoProgress": 600,
    "ShoalNoLiveSpider": 300,
    "ShoalDomainPaused": 1800,
    "ShoalRedisMemoryNearLimit": 300,
}
LAG_ALERTS = {"kafka-monitor": "ShoalKafkaMonitorLagGrowing", "sink": "ShoalSinkLagGrowing"}
DEAD_LETTERS = "ShoalDeadLettersGrowing"

Reading = tuple[int | None, dict[str, int]]  # (dead letters in the window or None, lag per component)


class KafkaFigures:
    """The dead letters of the last window and the groups' lag, read at most once per `cache_seconds`."""

    def __init__(self, settings: Settings, window: float, cache_seconds: float,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.settings = settings
        self.window = window
        self.clock = clock
        self._clients: tuple[Any, Any] | None = None
        self._reading = CachedReading(self._read, cache_seconds, time.monotonic)

    def get(self) -> Reading:
        return self._reading.get()

    def _read(self) -> Reading:
        """Each figure on its own: a group whose coordinator the broker is still loading leaves out
        that group's lag, not the dead letters or the other group's lag."""
        try:
            if self._clients is None:
                from utils.config.clients import kafka_admin, kafka_consumer

                self._clients = (kafka_admin(self.settings), kafka_consumer(self.settings, [], None))
        except Exception as exc:  # a broker away: no Kafka conditions this refresh
            log.warning("Alert figures from Kafka failed", extra={"error": str(exc)})
            return None, {}
        admin, consumer = self._clients
        dead = _or_none("the dead letters", lambda: self._dead_letters(consumer))
        lags = {}
        for component, (group, topics) in lag_groups(self.settings).items():
            lag = _or_none(f"the {component} lag", functools.partial(_lag, admin, consumer, group, topics))
            if lag is not None:
                lags[component] = lag
        return dead, lags

    def _dead_letters(self, consumer: Any) -> int:
        """Records of the dead-letter topic whose timestamp is within the window (none read)."""
        from kafka import TopicPartition

        topic = self.settings.topic("dead_letter")
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not parts:
            return 0
        since = consumer.offsets_for_times({tp: int((self.clock() - self.window) * 1000) for tp in parts})
        ends = consumer.end_offsets(parts)
        return sum(ends[tp] - found.offset for tp, found in since.items() if found is not None)

    def close(self) -> None:
        if self._clients is not None:
            for client in self._clients:
                client.close()


def _lag(admin: Any, consumer: Any, group: str, topics: list[str]) -> int:
    return read_group_lag(admin, consumer, group, topics, 1, 0).lag


def _or_none(figure: str, read: Callable[[], int]) -> int | None:
    """`read()`, or None (logged) when Kafka fails it: no condition from that figure this refresh."""
    try:
        return read()
    except Exception as exc:
        log.warning("Alert figures from Kafka failed", extra={"figure": figure, "error": str(exc)})
        return None


class Alerts:
    """Adds the Kafka conditions to the dashboard's and gives each its state and since when it holds."""

    def __init__(self, settings: Settings, figures: Callable[[], Reading],
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.figures = figures
        self.clock = clock
        self.rate = settings.get_float("ALERT_DEAD_LETTER_RATE")
        self.window = settings.get_float("ALERT_DEAD_LETTER_WINDOW")
        self.lag_limit = settings.get_int("ALERT_LAG_MESSAGES")
        self.lag_window = settings.get_float("ALERT_LAG_WINDOW")
        self.for_seconds: dict[str, float] = {
            **FOR_SECONDS, DEAD_LETTERS: settings.get_float("ALERT_DEAD_LETTER_FOR"),
            **dict.fromkeys(LAG_ALERTS.values(), settings.get_float("ALERT_LAG_FOR")),
        }  # fmt: skip
        self.history: dict[str, deque[tuple[float, int]]] = {c: deque() for c in LAG_ALERTS}
        self.since: dict[tuple[str, str | None], float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> tuple[Alerts, KafkaFigures]:
        figures = KafkaFigures(settings, settings.get_float("ALERT_DEAD_LETTER_WINDOW"),
                               settings.get_float("METRICS_FRONTIER_CACHE"))  # fmt: skip
        return cls(settings, figures.get), figures

    def conditions(self, found: list[dict[str, Any]], kafka_up: bool) -> list[dict[str, Any]]:
        """`found` (the Redis conditions) and the Kafka ones, each with `state`, `since` and `for`."""
        with self._lock:
            now = self.clock()
            held = found + (self._kafka_conditions(now) if kafka_up else [])
            keys = {(c["alert"], c["spiderid"]) for c in held}
            self.since = {k: self.since.get(k, now) for k in keys}
            for c in held:
                since, needed = self.since[(c["alert"], c["spiderid"])], self.for_seconds.get(c["alert"], 0)
                c.update(since=since, state="firing" if now - since >= needed else "pending", **{"for": needed})
            return held

    def _kafka_conditions(self, now: float) -> list[dict[str, Any]]:
        dead, lags = self.figures()
        held = []
        if dead is not None and dead / self.window > self.rate:
            detail = f"{dead} dead letters in {self.window:.0f} s ({dead / self.window:.2f}/s)"
            held.append({"alert": DEAD_LETTERS, "spiderid": None, "detail": detail})
        for component, lag in lags.items():
            if self._growing(component, now, lag) and lag > self.lag_limit:
                held.append({"alert": LAG_ALERTS[component], "spiderid": None,
                             "detail": f"{component} group {lag} messages behind and growing"})  # fmt: skip
        return held

    def _growing(self, component: str, now: float, lag: int) -> bool:
        """The least-squares slope of the lag readings of the last `lag_window` seconds is above 0."""
        history = self.history[component]
        history.append((now, lag))
        while history and history[0][0] < now - self.lag_window:
            history.popleft()
        return slope(list(history)) > 0


def slope(points: list[tuple[float, int]]) -> float:
    """Per second, as Prometheus' deriv(); 0 with fewer than two readings or all at one time."""
    if len(points) < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / len(points)
    mean_v = sum(v for _, v in points) / len(points)
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / spread if spread else 0.0
