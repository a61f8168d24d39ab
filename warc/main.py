"""`shoal warc`: archive the firehose until SIGTERM, or with --burst until its partitions are read to their end."""

from __future__ import annotations

import argparse
import logging
import time

from utils.cli.main import stop_event_on_signals
from utils.config.settings import Settings
from utils.node.startup import wait_for_services
from warc.loop import Archiver

log = logging.getLogger(__name__)

JOIN_TIMEOUT = 60.0  # seconds a burst waits to be given partitions


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("kafka",), stop)
    archiver = Archiver.from_settings(settings)
    if not getattr(args, "burst", False):
        archiver.run(stop)
        return 0
    handled, deadline = 0, time.monotonic() + JOIN_TIMEOUT
    while not stop.is_set():
        n = archiver.run_once()
        handled += n
        if n:
            continue
        if archiver.caught_up() or (not archiver.consumer.assignment() and time.monotonic() > deadline):
            break
    log.info("Burst done", extra={"messages": handled})
    archiver.close()
    return 0
