"""The optional API key of the mutating endpoints, and CORS when origins are configured."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from rest import envelope
from tests.integration.test_rest_helpers import client_of, envelope_error, gateway_cluster, success_data
from tests.support.cluster import TestCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

KEY = "s3cret-key"
ORIGIN = "http://dashboard.example"


@pytest.fixture(scope="module")
def keyed(services, tmp_path_factory) -> Iterator[TestCluster]:
    with gateway_cluster(
        services, tmp_path_factory.mktemp("rest-key"), REST_API_KEY=KEY, REST_CORS_ORIGINS=ORIGIN,
        WAIT_FOR_RESPONSE_TIME=0.5,
    ) as cluster:  # fmt: skip
        yield cluster


@pytest.fixture(scope="module")
def http(keyed: TestCluster) -> Iterator[httpx.Client]:
    client = client_of(keyed)
    yield client
    client.close()


MUTATING = [
    ("POST", "/feed", {"url": "http://127.0.0.250:9/", "appid": "keyapp", "crawlid": "k1"}),
    ("POST", "/crawls/keyapp/k1/stop", None),
    ("POST", "/dead-letters/keyapp/k1/replay", None),
    ("DELETE", "/dead-letters/keyapp/k1", None),
]


@pytest.mark.parametrize(("method", "path", "body"), MUTATING)
@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "wrong"}])
def test_mutating_endpoints_need_the_key(
    http: httpx.Client, method: str, path: str, body: object, headers: dict
) -> None:
    response = http.request(method, path, json=body, headers=headers)
    assert response.status_code == 401
    assert envelope_error(response)["message"] == envelope.NEED_KEY


@pytest.mark.parametrize(("method", "path", "body"), MUTATING)
def test_mutating_endpoints_accept_the_key(http: httpx.Client, method: str, path: str, body: object) -> None:
    data = success_data(http.request(method, path, json=body, headers={"X-API-Key": KEY}))
    assert data is None or "poll_id" in data  # sent; nothing answers actions in this cluster


@pytest.mark.parametrize("path", ["/", "/crawls", "/dashboard", "/dashboard/data", "/dead-letters/keyapp/k1"])
def test_reading_needs_no_key(http: httpx.Client, path: str) -> None:
    assert http.get(path).status_code == 200


def test_poll_needs_no_key(http: httpx.Client) -> None:
    assert http.post("/poll", json={"poll_id": "nothing-here"}).status_code == 404


def test_cors_allows_the_configured_origin_only(http: httpx.Client) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "X-API-Key"}
    allowed = http.options("/feed", headers={"Origin": ORIGIN, **preflight})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "x-api-key" in allowed.headers["access-control-allow-headers"].lower()
    refused = http.options("/feed", headers={"Origin": "http://evil.example", **preflight})
    assert "access-control-allow-origin" not in refused.headers
    simple = http.get("/crawls", headers={"Origin": ORIGIN})
    assert simple.headers["access-control-allow-origin"] == ORIGIN
