"""`python -m utils.observability.metrics.health`: exit 0 when this container's component reports itself healthy.

The Docker health check of every Shoal service. It reads the process's own /metrics (from the same
SHOAL_* settings, so METRICS_PORT must be fixed, not 0) and passes when `shoal_healthy` is 1: a
component that lost Redis, Kafka or ZooKeeper keeps running and retrying, and shows unhealthy here.
"""

from __future__ import annotations

import argparse
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families

from utils.config.errors import ConfigError
from utils.config.settings import Settings
from utils.observability.metrics.server import url_for

TIMEOUT = 3.0  # seconds for /metrics to answer


def check(url: str, timeout: float = TIMEOUT) -> tuple[bool, str]:
    """(healthy, why) from the `shoal_healthy` samples at `url`."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - our own http URL
            text = answer.read().decode("utf-8")
    except (OSError, urllib.error.URLError) as exc:
        return False, f"{url} does not answer: {exc}"
    values = [
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "shoal_healthy"
        for sample in family.samples
    ]
    if not values:
        return False, f"{url} has no shoal_healthy sample"
    if min(values) < 1:
        return False, "unhealthy: a service this process needs does not answer (see shoal_dependency_up)"
    return True, "healthy"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m utils.observability.metrics.health", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--url", help="metrics URL; default from METRICS_HOST and METRICS_PORT")
    args = parser.parse_args(argv)
    url = args.url
    if url is None:
        try:
            settings = Settings.load()
        except ConfigError as exc:
            print(f"health: {exc}", file=sys.stderr)
            return 2
        if settings.get_int("METRICS_PORT") == 0:
            print("health: METRICS_PORT is 0 (a free port); give a fixed port or --url", file=sys.stderr)
            return 2
        url = url_for(settings.get_str("METRICS_HOST"), settings.get_int("METRICS_PORT"))
    healthy, why = check(url)
    print(f"health: {why}")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
