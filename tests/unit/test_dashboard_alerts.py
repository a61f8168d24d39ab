"""Issue 33: the gateway's alert conditions held over time (rest/alerting.py), on an injected clock:
pending until their rule's `for:`, then firing, forgotten when they stop holding; a lag "grows" by
the slope of the readings of its window, as Prometheus' deriv() tells."""

from __future__ import annotations

from typing import Any

from rest.alerting import DEAD_LETTERS, Alerts, Reading, slope
from utils.config.settings import Settings

SCALED = {"ALERT_DEAD_LETTER_RATE": "0.5", "ALERT_DEAD_LETTER_WINDOW": "10", "ALERT_DEAD_LETTER_FOR": "30",
          "ALERT_LAG_MESSAGES": "100", "ALERT_LAG_WINDOW": "60", "ALERT_LAG_FOR": "20"}  # fmt: skip


class Cluster:
    """What the gateway reads from Kafka, set by the test, and the time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.dead: int | None = 0
        self.lags = {"kafka-monitor": 0, "sink": 0}

    def reading(self) -> Reading:
        return self.dead, dict(self.lags)


def alerts_of(cluster: Cluster) -> Alerts:
    settings = Settings.load(environ={f"SHOAL_{k}": v for k, v in SCALED.items()})
    return Alerts(settings, cluster.reading, clock=lambda: cluster.now)


def states(alerts: Alerts, found: list[dict[str, Any]] | None = None, kafka_up: bool = True) -> dict[str, str]:
    return {c["alert"]: c["state"] for c in alerts.conditions(found or [], kafka_up)}


def test_a_condition_is_pending_until_its_for_then_firing_and_forgotten_when_it_stops() -> None:
    cluster = Cluster()
    alerts = alerts_of(cluster)
    assert states(alerts) == {}
    cluster.dead = 6  # 0.6/s over 10 s
    assert states(alerts) == {DEAD_LETTERS: "pending"}
    cluster.now += 29
    assert states(alerts) == {DEAD_LETTERS: "pending"}
    cluster.now += 1
    assert states(alerts) == {DEAD_LETTERS: "firing"}
    cluster.dead = 5  # 0.5/s: not above the rate
    assert states(alerts) == {}
    cluster.dead = 6
    assert states(alerts) == {DEAD_LETTERS: "pending"}  # held again: its `for:` starts over


def test_a_lag_fires_when_over_its_limit_and_growing_over_its_window() -> None:
    cluster = Cluster()
    alerts = alerts_of(cluster)
    alert = "ShoalSinkLagGrowing"
    for lag in (500, 500, 400):  # over the limit, flat then falling
        cluster.lags["sink"] = lag
        assert states(alerts) == {}
        cluster.now += 10
    cluster.lags["sink"] = 450  # still falling over the window by least squares
    assert states(alerts) == {}
    cluster.now += 70  # the older readings leave the window: one reading is no slope
    cluster.lags["sink"] = 460
    assert states(alerts) == {}
    cluster.now += 20
    cluster.lags["sink"] = 470
    assert states(alerts) == {alert: "pending"}
    cluster.now += 20
    cluster.lags["sink"] = 480
    assert states(alerts) == {alert: "firing"}
    assert states(alerts, kafka_up=False) == {}  # no broker: no Kafka conditions, their `for:` lost


def test_the_redis_conditions_take_their_rules_for() -> None:
    cluster = Cluster()
    alerts = alerts_of(cluster)
    paused = [{"alert": "ShoalDomainPaused", "spiderid": "link", "detail": "example.com is paused"}]
    assert states(alerts, paused) == {"ShoalDomainPaused": "pending"}
    cluster.now += 1800
    shown = alerts.conditions([dict(paused[0])], True)
    assert (shown[0]["state"], shown[0]["since"], shown[0]["for"]) == ("firing", 1000.0, 1800)


def test_slope_is_derivs() -> None:
    assert slope([]) == slope([(1.0, 5)]) == slope([(1.0, 5), (1.0, 9)]) == 0.0
    assert slope([(0.0, 0), (10.0, 10), (20.0, 20)]) == 1.0
