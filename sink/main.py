"""`shoal sink`: run a sink until SIGTERM, or with --burst until its partitions are read to their end."""

from __future__ import annotations

import argparse
import logging

from sink.loop import Sink
from utils.cli.main import stop_event_on_signals
from utils.config.consumer import run_burst
from utils.config.settings import Settings
from utils.node.startup import wait_for_services

log = logging.getLogger(__name__)


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("kafka",), stop)
    sink = Sink.from_settings(settings)
    if getattr(args, "burst", False):
        run_burst(sink, lambda: bool(sink.feed.consumer.assignment()), stop)
        return 0
    sink.run(stop)
    return 0
