"""`shoal crawl --spider link`: one spider process."""

from __future__ import annotations

import argparse
import threading

from crawler.runner import run
from utils.config.settings import Settings
from utils.node.startup import wait_for_services


def main(settings: Settings, args: argparse.Namespace) -> int:
    wait_for_services(settings, ("redis", "kafka"), threading.Event())
    run(settings, args.spider)
    return 0
