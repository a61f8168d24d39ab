"""`shoal sink`: run a sink until SIGTERM, or with --burst until its partitions are read to their end."""

from __future__ import annotations

import argparse
import logging
import threading
import time

from sink.loop import Sink
from utils.cli.main import stop_event_on_signals
from utils.config.settings import Settings
from utils.node.startup import wait_for_services

log = logging.getLogger(__name__)

JOIN_TIMEOUT = 60.0  # seconds a burst waits to be given partitions


def main(settings: Settings, args: argparse.Namespace) -> int:
    stop = stop_event_on_signals()
    wait_for_services(settings, ("kafka",), stop)
    sink = Sink.from_settings(settings)
    if getattr(args, "burst", False):
        run_burst(sink, stop)
        return 0
    sink.run(stop)
    return 0


def run_burst(sink: Sink, stop: threading.Event) -> int:
    """Store what the topics hold and stop once every assigned partition is read to its end."""
    handled = 0
    deadline = time.monotonic() + JOIN_TIMEOUT
    while not stop.is_set():
        n = sink.run_once(stop)
        handled += n
        if n:
            continue
        if sink.caught_up() or (not sink.feed.consumer.assignment() and time.monotonic() > deadline):
            break
    log.info("Burst done", extra={"messages": handled})
    sink.close()
    return handled
