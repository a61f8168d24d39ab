"""`shoal rest`: the REST gateway. Not built yet; it arrives with its own issue."""

from __future__ import annotations

import argparse
import logging

from utils.cli import stop_event_on_signals
from utils.settings import Settings

log = logging.getLogger(__name__)


def main(settings: Settings, args: argparse.Namespace) -> int:
    """Says "not yet" and waits for SIGTERM, so supervisord does not restart it in a loop."""
    log.warning(
        "The REST gateway is not built yet; this process only waits",
        extra={"port": settings.get_int("REST_PORT")},
    )
    stop = stop_event_on_signals()
    stop.wait()
    return 0
