"""Untrusted clients of the gateway: body size (413), JSON nesting (400), refused seed URLs (400),
and the dashboard's Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from rest import limits
from tests.integration.test_rest_helpers import client_of, envelope_error, gateway_cluster, success_data

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

MAX_BODY = 4096
CRAWL = {"url": "http://127.22.0.9:9/", "appid": "limits", "crawlid": "l1"}


@pytest.fixture(scope="module")
def http(services, tmp_path_factory) -> Iterator[httpx.Client]:
    with gateway_cluster(
        services, tmp_path_factory.mktemp("rest-limits"), REST_MAX_BODY_BYTES=MAX_BODY, REST_JSON_MAX_DEPTH=8,
        WAIT_FOR_RESPONSE_TIME=0.2,
    ) as cluster:  # fmt: skip
        client = client_of(cluster)
        yield client
        client.close()


def test_a_body_over_the_limit_is_answered_413_with_or_without_content_length(http: httpx.Client) -> None:
    big = {**CRAWL, "attrs": {"pad": "x" * MAX_BODY}}
    declared = http.post("/feed", json=big)
    assert declared.status_code == 413
    assert envelope_error(declared)["message"] == limits.TOO_LARGE

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"url": "http://127.22.0.9/", "appid": "a", "crawlid": "c", "attrs": {"pad": "'
        for _ in range(8):
            yield b"y" * 1024
        yield b'"}}'

    streamed = http.post("/feed", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413
    assert http.post("/poll", content=b"[" * (MAX_BODY + 1)).status_code == 413


def test_a_body_within_the_limit_still_goes_through(http: httpx.Client) -> None:
    assert success_data(http.post("/feed", json=CRAWL)) is None


@pytest.mark.parametrize("path", ["/feed", "/poll"])
def test_json_nested_deeper_than_the_limit_is_answered_400(path: str, http: httpx.Client) -> None:
    deep: object = "leaf"
    for _ in range(9):
        deep = {"k": deep}
    response = http.post(path, json={**CRAWL, "attrs": deep})
    assert response.status_code == 400
    assert envelope_error(response)["message"] == limits.TOO_DEEP
    ujson_limit = http.post(path, content=b"[" * 2000 + b"]" * 2000,  # beyond the parser's own limit
                            headers={"content-type": "application/json"})
    assert ujson_limit.status_code == 400


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"url": "http://127.22.0.9/", "appid": "limits", "crawlid": "l2", "attrs": {"x": 1e400}}', "attrs.x"),
        (b'{"url": "http://127.22.0.9/", "appid": "limits", "crawlid": "l2", "attrs": {"x": NaN}}', ""),
        (b'{"url": "http://127.22.0.9/", "appid": "limits", "crawlid": "l2", "attrs": {"x": "\\ud800"}}', "surrogate"),
        (b'{"url": "http://127.22.0.9/", "appid": "limits", "crawlid": "l2", "attrs": {"n": 99999999999999999999}}',
         "64 bits"),
    ],
)  # fmt: skip
def test_values_the_kafka_monitor_would_refuse_are_answered_400_by_the_gateway(
    http: httpx.Client, body: bytes, reason: str
) -> None:
    response = http.post("/feed", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert reason in response.text


@pytest.mark.parametrize(
    ("url", "reason"),
    [("http://169.254.169.254/latest/meta-data/", "address"), ("http://[fd00:ec2::254]/", "address")],
)  # fmt: skip
def test_a_seed_the_address_policy_refuses_is_answered_400_with_the_reason(
    http: httpx.Client, url: str, reason: str
) -> None:
    response = http.post("/feed", json={**CRAWL, "url": url})
    assert response.status_code == 400
    assert f"address policy ({reason})" in envelope_error(response)["cause"]


def test_a_seed_of_another_scheme_is_answered_400_by_the_schema(http: httpx.Client) -> None:
    response = http.post("/feed", json={**CRAWL, "url": "file:///etc/passwd"})
    assert response.status_code == 400
    assert "url" in envelope_error(response)["cause"]


def test_the_dashboard_allows_only_its_own_script(http: httpx.Client) -> None:
    policy = http.get("/dashboard").headers["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["default-src"] == "'none'"
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy  # noqa: PT018
