"""`shoal kafka-monitor`: run the monitor until SIGTERM, or with --burst until the topic is read."""

from __future__ import annotations

import argparse
import logging
import threading
import time

from kafka_monitor.monitor import KafkaMonitor
from utils.cli.main import stop_event_on_signals
from utils.config.settings import Settings
from utils.node.startup import wait_for_services

log = logging.getLogger(__name__)

JOIN_TIMEOUT = 60.0  # seconds a burst waits to be given partitions (all may belong to other monitors)


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("redis", "kafka"), stop)
    monitor = KafkaMonitor.from_settings(settings)
    if getattr(args, "burst", False):
        run_burst(monitor, stop)
        return 0
    monitor.run(stop)
    return 0


def run_burst(monitor: KafkaMonitor, stop: threading.Event) -> int:
    """Process what the topic holds and stop once every assigned partition is read to its end."""
    handled = 0
    deadline = time.monotonic() + JOIN_TIMEOUT
    while not stop.is_set():
        n = monitor.run_once(stop)
        handled += n
        if n:
            continue
        if monitor.caught_up() or (not monitor.consumer.assignment() and time.monotonic() > deadline):
            break
    log.info("Burst done", extra={"messages": handled})
    monitor.close()
    return handled
