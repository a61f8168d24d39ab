"""An idle redis monitor blocks on the jobs stream until its next periodic work is due (issue 37):
its periodic work shares one grid, so it wakes about twice a second, not every SLEEP_TIME."""

from __future__ import annotations

import pytest

from redis_monitor.monitor import RedisMonitor
from tests.support.cluster import TestCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


class CustomPeriodic:
    """A user's periodic plugin with no `every`: the monitor cannot know when it is due."""

    def run_once(self, max_items: int) -> int:
        return 0


def test_an_idle_monitor_waits_until_its_next_periodic_work_is_due(cluster: TestCluster) -> None:
    now = [1000.25]
    settings = cluster.settings.copy_with(REDIS_MONITOR_RETRY_DELAY=1.0, REAPER_INTERVAL=1.0, STATS_CYCLE=1.0)
    monitor = RedisMonitor.from_settings(settings, clock=lambda: now[0])
    try:
        assert monitor.run_once() == 0
        assert monitor.idle_wait(0.02) == pytest.approx(0.25)  # the reclaim of failed jobs, at 1000.5
        now[0] = 1000.5
        monitor.run_once()
        assert monitor.idle_wait(0.02) == pytest.approx(0.5)  # reclaim, reaper, expiry, flush: all at 1001
        now[0] = 1000.99
        assert monitor.idle_wait(0.02) == pytest.approx(0.02)  # never shorter than SLEEP_TIME

        monitor.periodic.append(CustomPeriodic())
        now[0] = 1000.5
        assert monitor.idle_wait(0.02) == 0.02  # a plugin of unknown period is polled as before
    finally:
        monitor.close()
