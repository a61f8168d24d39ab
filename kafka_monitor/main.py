"""`shoal kafka-monitor`: run the monitor until SIGTERM, or with --burst until the topic is read."""

from __future__ import annotations

import argparse
import logging

from kafka_monitor.monitor import KafkaMonitor
from utils.cli.main import stop_event_on_signals
from utils.config.consumer import run_burst
from utils.config.settings import Settings
from utils.node.startup import wait_for_services

log = logging.getLogger(__name__)


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("redis", "kafka"), stop)
    monitor = KafkaMonitor.from_settings(settings)
    if getattr(args, "burst", False):
        run_burst(monitor, lambda: bool(monitor.consumer.assignment()), stop)
        return 0
    monitor.run(stop)
    return 0
