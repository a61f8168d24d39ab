"""Schemathesis against the gateway's OpenAPI document: no generated request gets a 5xx; and issue 30's
hostile requests (deep nesting, 1e400, bad proxies, huge regex lists, '.'/'..' ids) get a 2xx/4xx quickly.

Bounded in examples and time; the report is kept in test-artifacts/schemathesis.txt.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.test_rest_helpers import base_url, client_of, gateway_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCHEMATHESIS = Path(sys.executable).parent / "st"
MAX_SECONDS = 40  # fuzzing repeats until this budget is spent


def test_no_generated_request_gets_a_server_error(services, tmp_path, postgres, pg_schema) -> None:
    with gateway_cluster(services, tmp_path, WAIT_FOR_RESPONSE_TIME=0.2, KAFKA_FEED_TIMEOUT=5.0,
                         **postgres.settings(pg_schema)) as cluster:  # the revisit routes read PostgreSQL (issue 31)
        client_of(cluster).close()  # GREEN: Kafka and Redis connected
        run = subprocess.run(
            [
                str(SCHEMATHESIS), "run", f"{base_url(cluster)}/openapi.json",
                "--checks", "not_a_server_error", "--max-examples", "15", "--max-time", str(MAX_SECONDS),
                "--workers", "1", "--seed", "20240607", "--generation-database", "none",
                "--request-timeout", "15", "--no-color",
            ],
            capture_output=True, text=True, timeout=MAX_SECONDS + 150, cwd=tmp_path,
        )  # fmt: skip
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "schemathesis.txt").write_text(run.stdout + run.stderr)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "not_a_server_error" not in run.stdout  # named only when the check fails
    assert " passed" in run.stdout


BASE = {"url": "http://127.0.0.250:9/", "appid": "hostile", "crawlid": "h1"}
NESTED = "[" * 100_000 + "]" * 100_000


def _feed(**fields: object) -> str:
    return json.dumps({**BASE, **fields})


# Issue 30's hostile requests: each must get a 2xx or 4xx answer, quickly, and the gateway go on.
HOSTILE_BODIES = {
    "deep nesting at the top": NESTED,
    "deep nesting in attrs": _feed()[:-1] + ', "attrs": {"x": ' + NESTED + "}}",
    "1e400 in attrs": _feed()[:-1] + ', "attrs": {"x": 1e400}}',
    "-1e400 as priority": _feed()[:-1] + ', "priority": -1e400}',
    "NaN in attrs": _feed()[:-1] + ', "attrs": {"x": NaN}}',
    "proxy with a bad port": _feed(proxy="http://u:p@h:x"),
    "proxy with port 99999": _feed(proxy="http://h:99999"),
    "proxy at the metadata address": _feed(proxy="http://169.254.169.254:80"),
    "proxy of another scheme": _feed(proxy="ftp://h:21"),
    "6,000 allow_regex patterns": _feed(allow_regex=[f"/p{i}x/" for i in range(6000)]),
    "1,000 deny_regex patterns of 256 chars": _feed(deny_regex=[f"/{i}/" + "(a|b)" * 50 for i in range(1000)]),
    "a catastrophic regex": _feed(allow_regex=["(a+)+$", "(a)\\1"]),
    "crawlid '.'": _feed(crawlid="."),
    "crawlid '..'": _feed(crawlid=".."),
    "spiderid '..'": _feed(spiderid=".."),
    "appid '..'": _feed(appid=".."),
}
HOSTILE_PATHS = [
    ("GET", "/crawls/hostile/.."), ("GET", "/crawls/hostile/%2E%2E"), ("GET", "/crawls/%2E%2E/%2E"),
    ("POST", "/crawls/hostile/%2E%2E/stop"), ("GET", "/crawls/hostile/h1/events?spiderid=%2E%2E"),
    ("GET", "/dead-letters/%2E%2E/%2E%2E"), ("DELETE", "/dead-letters/hostile/%2E"),
    ("POST", "/dead-letters/hostile/%2E%2E/replay"),
]  # fmt: skip


@pytest.fixture(scope="module")
def gateway(services, tmp_path_factory) -> Iterator[httpx.Client]:
    with gateway_cluster(services, tmp_path_factory.mktemp("rest-hostile"), WAIT_FOR_RESPONSE_TIME=0.2,
                         KAFKA_FEED_TIMEOUT=5.0) as cluster:  # fmt: skip
        client = client_of(cluster, timeout=10)
        yield client
        client.close()


def _answered_without_a_server_error(gateway: httpx.Client, response: httpx.Response, started: float) -> None:
    assert time.monotonic() - started < 5, "the gateway took too long"
    assert 200 <= response.status_code < 500, response.text[:500]
    assert gateway.get("/").json()["node_health"] == "GREEN"  # and it goes on


@pytest.mark.parametrize("name", list(HOSTILE_BODIES))
def test_a_hostile_feed_gets_a_2xx_or_4xx_answer_quickly(gateway: httpx.Client, name: str) -> None:
    started = time.monotonic()
    response = gateway.post("/feed", content=HOSTILE_BODIES[name].encode(),
                            headers={"Content-Type": "application/json"})  # fmt: skip
    _answered_without_a_server_error(gateway, response, started)


@pytest.mark.parametrize(("method", "path"), HOSTILE_PATHS)
def test_dot_ids_in_paths_get_a_2xx_or_4xx_answer_quickly(gateway: httpx.Client, method: str, path: str) -> None:
    started = time.monotonic()
    if path.endswith("/events?spiderid=%2E%2E"):
        with gateway.stream(method, path, timeout=3) as response:
            _answered_without_a_server_error(gateway, response, started)
        return
    _answered_without_a_server_error(gateway, gateway.request(method, path), started)
