"""`shoal redis-monitor`: run the monitor until SIGTERM (or once through, with --burst)."""

from __future__ import annotations

import argparse

from redis_monitor.monitor import RedisMonitor
from utils.cli.main import stop_event_on_signals
from utils.config.settings import Settings
from utils.frontier.upgrade import upgrade_stored_requests
from utils.node.startup import wait_for_services


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("redis", "kafka"), stop)
    monitor = RedisMonitor.from_settings(settings)
    upgrade_stored_requests(monitor.context.redis, monitor.context.shards)
    if getattr(args, "burst", False):
        while monitor.run_once(settings.get_int("REDIS_MONITOR_BATCH")):
            pass
        monitor.close()
        return 0
    monitor.run(stop)
    return 0
