"""The API key on every route but health and the dashboard page, JSON-only bodies, redaction, and CORS
(issue 24: with REST_API_KEY set, reads, polls and event streams needed no key; /feed took text/plain)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from rest import envelope
from tests.integration.test_rest_helpers import client_of, envelope_error, gateway_cluster, success_data
from tests.support.cluster import TestCluster
from utils.config.clients import redis_client
from utils.frontier import dead_letters, keys

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


@pytest.mark.parametrize("path", ["/", "/dashboard", "/dashboard/static/dashboard.js"])
def test_health_and_the_dashboard_page_need_no_key(http: httpx.Client, path: str) -> None:
    assert http.get(path).status_code == 200


READING = [
    ("GET", "/crawls"), ("GET", "/crawls/keyapp/k1"), ("GET", "/crawls/keyapp/k1/events"),
    ("GET", "/stats/all"), ("GET", "/dead-letters/keyapp/k1"), ("GET", "/dashboard/data"), ("POST", "/poll"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path"), READING)
@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "wrong"}, {"Cookie": "shoal_api_key=wrong"}])
def test_every_data_route_needs_the_key(http: httpx.Client, method: str, path: str, headers: dict) -> None:
    response = http.request(method, path, json={"poll_id": "nothing-here"}, headers=headers)
    assert response.status_code == 401
    assert envelope_error(response)["message"] == envelope.NEED_KEY


@pytest.mark.parametrize("headers", [{"X-API-Key": KEY}, {"Cookie": f"shoal_api_key={KEY}"}])
def test_the_key_in_a_header_or_the_dashboard_cookie_opens_them(http: httpx.Client, headers: dict) -> None:
    assert success_data(http.get("/crawls", headers=headers)) is not None
    assert success_data(http.get("/dashboard/data", headers=headers)) is not None
    own = {"Origin": str(http.base_url).rstrip("/")}  # a cookie opens a POST from the gateway's own pages only
    assert http.post("/poll", json={"poll_id": "nothing-here"}, headers={**headers, **own}).status_code == 404


CONTENT_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
@pytest.mark.parametrize("path", ["/feed", "/poll"])
def test_bodies_must_be_declared_json(http: httpx.Client, path: str, content_type: str | None) -> None:
    """A browser posts text/plain cross-site without a preflight: refused before the body is read."""
    body = json.dumps({"url": "http://127.0.0.250:9/", "appid": "keyapp", "crawlid": "plain", "poll_id": "x"})
    headers = {"X-API-Key": KEY, **({"Content-Type": content_type} if content_type else {})}
    response = http.post(path, content=body.encode(), headers=headers)
    assert response.status_code == 415
    assert envelope_error(response)["message"] == envelope.NEED_JSON


def test_dead_letters_and_logs_show_no_cookie_or_token(keyed: TestCluster, http: httpx.Client) -> None:
    letter = dead_letters.record(
        {"url": "http://a.example.com/", "appid": "keyapp", "crawlid": "secrets", "spiderid": "link",
         "cookie": "session=COOKIE-VALUE", "headers": {"Authorization": "Bearer TOKEN-VALUE"},
         "proxy": "http://alice:PROXY-PASSWORD@127.24.0.9:3128"},
        "boom", 500, 3, "crawler",
    )  # fmt: skip
    r = redis_client(keyed.settings)
    r.rpush(keys.dead_letters("link", "keyapp", "secrets"), json.dumps(letter))
    shown = http.get("/dead-letters/keyapp/secrets", params={"spiderid": "link"}, headers={"X-API-Key": KEY})
    assert success_data(shown)["total"] == 1
    http.post("/feed", json={"url": "http://127.0.0.250:9/", "appid": "keyapp", "crawlid": "logged",
                             "cookie": "session=COOKIE-VALUE", "headers": {"Authorization": "Bearer TOKEN-VALUE"}},
              headers={"X-API-Key": KEY})  # fmt: skip
    logs = "\n".join(keyed.logs())
    assert "'feed' endpoint called" in logs
    for secret in ("COOKIE-VALUE", "TOKEN-VALUE", "PROXY-PASSWORD"):
        assert secret not in shown.text
        assert secret not in logs


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
