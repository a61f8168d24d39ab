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


def _samples(url: str, name: str, timeout: float) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample of family `name` at `url`; OSError when it does not answer."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - our own http URL
        text = answer.read().decode("utf-8")
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        if family.name == name
        for sample in family.samples
    ]


def unreachable(url: str, timeout: float = TIMEOUT) -> list[str]:
    """The services the process at `url` reports it cannot reach (`shoal_dependency_up` 0), sorted."""
    return sorted(labels["dependency"] for labels, value in _samples(url, "shoal_dependency_up", timeout) if value < 1)


def check(url: str, timeout: float = TIMEOUT) -> tuple[bool, str]:
    """(healthy, why) from the `shoal_healthy` samples at `url`; an unhealthy one names the services."""
    try:
        values = [value for _, value in _samples(url, "shoal_healthy", timeout)]
        down = unreachable(url, timeout) if values and min(values) < 1 else []
    except (OSError, urllib.error.URLError) as exc:
        return False, f"{url} does not answer: {exc}"
    if not values:
        return False, f"{url} has no shoal_healthy sample"
    if min(values) < 1:
        return False, f"unhealthy: cannot reach {', '.join(down) or 'a service it needs'}"
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
