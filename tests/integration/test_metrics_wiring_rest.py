"""The REST gateway's /metrics counts every request by its route's template, not by its path, so a
client asking for many crawls adds no series (issue 8, item 3)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.integration.test_rest_helpers import base_url, gateway_cluster
from tests.support.cluster import TestCluster
from tests.support.metrics import scrape, total
from tests.support.services import wait_until
from utils.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def rest(services, tmp_path) -> Iterator[tuple[TestCluster, str]]:
    port = free_port()
    with gateway_cluster(services, tmp_path, METRICS_PORT=port) as cluster:
        yield cluster, f"http://127.0.0.1:{port}/metrics"


def answers(client: httpx.Client) -> bool:
    try:
        client.get("/")
    except httpx.HTTPError:
        return False
    return True


def test_requests_are_counted_by_route_template(rest: tuple[TestCluster, str]) -> None:
    cluster, metrics = rest
    with httpx.Client(base_url=base_url(cluster), timeout=30) as client:
        wait_until(lambda: answers(client), timeout=60, interval=0.1, message="the gateway never answered")
        before = scrape(metrics)
        for crawlid in ("c1", "c2", "c3"):
            client.get(f"/crawls/app/{crawlid}")
        assert client.get("/no/such/route").status_code == 404

    after = scrape(metrics)
    crawl_route = {"route": "/crawls/{appid}/{crawlid}", "method": "GET"}
    counted = total(after, "shoal_rest_requests_total", **crawl_route) - total(
        before, "shoal_rest_requests_total", **crawl_route
    )
    assert counted == 3
    assert not [labels for (name, labels), _ in after.items() if "c1" in dict(labels).get("route", "")]
    assert total(after, "shoal_rest_requests_total", route="unmatched", status="404") == 1
    assert total(after, "shoal_rest_request_duration_seconds_count", route="/crawls/{appid}/{crawlid}") >= 3
    assert total(after, "shoal_rest_requests_total", route="/", method="GET") >= 1
