"""Issue 30, finding 10: the dashboard's cookie opens no state-changing request from another origin, is
HttpOnly and SameSite=Strict (Secure over https), and /docs, /redoc and /openapi.json need the key."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from rest import envelope
from tests.integration.test_rest_helpers import client_of, envelope_error, gateway_cluster, success_data

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

KEY = "csrf-key/with%signs"
COOKIE = {"Cookie": "shoal_api_key=csrf-key%2Fwith%25signs"}


@pytest.fixture(scope="module")
def http(services, tmp_path_factory) -> Iterator[httpx.Client]:
    with gateway_cluster(services, tmp_path_factory.mktemp("rest-csrf"), REST_API_KEY=KEY,
                         WAIT_FOR_RESPONSE_TIME=0.2) as cluster:  # fmt: skip
        client = client_of(cluster)
        yield client
        client.close()


@pytest.fixture(autouse=True)
def no_cookie(http: httpx.Client) -> None:
    """Each test starts without the cookie an earlier test's /dashboard/key set in the shared client."""
    http.cookies.clear()


def own_origin(http: httpx.Client) -> dict[str, str]:
    return {"Origin": str(http.base_url).rstrip("/")}


STATE_CHANGING = [
    ("POST", "/crawls/csrfapp/c1/stop"),
    ("POST", "/dead-letters/csrfapp/c1/replay"),
    ("DELETE", "/dead-letters/csrfapp/c1"),
    ("POST", "/feed"),
]
ELSEWHERE = [{}, {"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": "http://127.0.0.1:1"}]


@pytest.mark.parametrize(("method", "path"), STATE_CHANGING)
@pytest.mark.parametrize("origin", ELSEWHERE)
def test_the_cookie_alone_opens_no_state_changing_route_from_another_origin(
    http: httpx.Client, method: str, path: str, origin: dict
) -> None:
    body = {"url": "http://127.0.0.250:9/", "appid": "csrfapp", "crawlid": "c1"} if path == "/feed" else None
    response = http.request(method, path, json=body, headers={**COOKIE, **origin})
    assert response.status_code == 401
    assert envelope_error(response)["message"] == envelope.NEED_KEY


@pytest.mark.parametrize(("method", "path"), STATE_CHANGING[:3])
def test_the_cookie_opens_them_from_the_gateways_own_origin(http: httpx.Client, method: str, path: str) -> None:
    data = success_data(http.request(method, path, headers={**COOKIE, **own_origin(http)}))
    assert data is None or "poll_id" in data  # sent; nothing answers actions in this cluster


def test_the_key_route_sets_an_httponly_samesite_strict_cookie_that_opens_the_reads(http: httpx.Client) -> None:
    assert http.post("/dashboard/key", headers={"X-API-Key": "wrong"}).status_code == 401
    response = http.post("/dashboard/key", headers={"X-API-Key": KEY})
    assert response.status_code == 200
    cookie = response.headers["set-cookie"]
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes
    assert "secure" not in attributes  # served over plain http here
    value = cookie.split(";")[0].split("=", 1)[1]
    reader = httpx.Client(base_url=http.base_url, timeout=30)
    try:
        assert success_data(reader.get("/dashboard/data", headers={"Cookie": f"shoal_api_key={value}"})) is not None
    finally:
        reader.close()


def test_the_cookie_is_secure_when_the_gateway_is_served_over_https(http: httpx.Client) -> None:
    """Behind a TLS proxy on the same host (uvicorn trusts X-Forwarded-Proto from 127.0.0.1)."""
    response = http.post("/dashboard/key", headers={"X-API-Key": KEY, "X-Forwarded-Proto": "https"})
    assert "secure" in {part.strip().lower() for part in response.headers["set-cookie"].split(";")}


@pytest.mark.parametrize("path", ["/openapi.json", "/docs", "/redoc"])
def test_the_api_documents_need_the_key(http: httpx.Client, path: str) -> None:
    assert http.get(path).status_code == 401
    assert http.get(path, headers={"X-API-Key": "wrong"}).status_code == 401
    assert http.get(path, headers={"X-API-Key": KEY}).status_code == 200
    assert http.get(path, headers=COOKIE).status_code == 200  # the dashboard user's browser
