"""`shoal warc`: archive the firehose until SIGTERM, or with --burst until its partitions are read to their end."""

from __future__ import annotations

import argparse

from utils.cli.main import stop_event_on_signals
from utils.config.consumer import run_burst
from utils.config.settings import Settings
from utils.node.startup import wait_for_services
from warc.loop import Archiver


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("kafka",), stop)
    archiver = Archiver.from_settings(settings)
    if not getattr(args, "burst", False):
        archiver.run(stop)
        return 0
    run_burst(archiver, lambda: bool(archiver.consumer.assignment()), stop)
    return 0
