"""`shoal kafka-monitor`: run the monitor until SIGTERM (or once through, with --burst)."""

from __future__ import annotations

import argparse
import logging

from kafka_monitor.monitor import KafkaMonitor
from utils.cli import stop_event_on_signals
from utils.settings import Settings
from utils.startup import wait_for_services

log = logging.getLogger(__name__)


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("redis", "kafka"), stop)
    monitor = KafkaMonitor.from_settings(settings)
    if getattr(args, "burst", False):
        while monitor.run_once(stop):
            pass
        monitor.close()
        return 0
    monitor.run(stop)
    return 0
