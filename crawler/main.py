"""`shoal crawl --spider link`: one spider process."""

from __future__ import annotations

import argparse
import sys
import threading

from crawler.registry import SpiderRegistryError, spider_class
from crawler.runner import run
from utils.config.settings import Settings
from utils.node.startup import wait_for_services


def main(settings: Settings, args: argparse.Namespace) -> int:
    try:  # a wrong spider name or a broken spider module is reported before waiting for any service
        spider_class(settings, args.spider)
    except SpiderRegistryError as exc:
        print(f"shoal crawl: {exc}", file=sys.stderr)
        return 2
    wait_for_services(settings, ("redis", "kafka"), threading.Event())
    run(settings, args.spider)
    return 0
