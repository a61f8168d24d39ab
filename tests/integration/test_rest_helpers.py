"""Helpers shared by the REST gateway's tests (no tests here): a gateway process and its HTTP client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.frontier import keys
from utils.frontier.shards import Shards
from utils.services import LocalServices, free_port


@contextmanager
def gateway_cluster(
    services: LocalServices, log_dir: Path, *components: str, **overrides: Any
) -> Iterator[TestCluster]:
    """A TestCluster with the gateway on a free port (plus `components`), stopped at the end;
    the components' logs are printed when the block raised."""
    cluster = TestCluster(services, log_dir, REST_PORT=free_port(), **overrides)
    try:
        for component in components:
            cluster.start(component)
        cluster.start("rest", name="rest")
        yield cluster
    except BaseException:
        print("\n".join(cluster.logs()))
        raise
    finally:
        cluster.stop_all()


def base_url(cluster: TestCluster) -> str:
    return f"http://127.0.0.1:{cluster.settings.get_int('REST_PORT')}"


def client_of(cluster: TestCluster, timeout: float = 30) -> httpx.Client:
    """An HTTP client of the cluster's gateway, once the gateway reports GREEN."""
    client = httpx.Client(base_url=base_url(cluster), timeout=timeout)

    def green() -> bool:
        try:
            return client.get("/").json()["node_health"] == "GREEN"
        except httpx.HTTPError:
            return False

    wait_until(green, timeout=60, interval=0.1, message="the gateway never reported GREEN")
    return client


def redis_of(cluster: TestCluster) -> Any:
    """A str-returning client of the test's Redis (one redis-server database or the Redis Cluster)."""
    return redis_client(cluster.settings, decode=True)


def write_progress(client: redis.Redis, appid: str, crawlid: str, spiderid: str = "link", **counters: Any) -> None:
    """A crawl's progress hash and its `shoal:crawls` entry, as the frontier scripts leave them."""
    key = Shards.for_client(client).tags[0] + keys.crawl_progress(spiderid, appid, crawlid)  # progress is per shard
    fields = {"spiderid": spiderid, "appid": appid, "crawlid": crawlid, **{k: str(v) for k, v in counters.items()}}
    fields.setdefault("started", str(time.time()))
    pipe = client.pipeline(transaction=False)
    pipe.hset(key, mapping=fields)
    pipe.zadd(keys.CRAWLS, {keys.crawl_member(spiderid, appid, crawlid): time.time()})
    pipe.sadd(keys.SPIDERS, spiderid)
    pipe.execute()


def envelope_error(response: httpx.Response) -> dict[str, Any]:
    """The error of a FAILURE envelope (and that it is one)."""
    body = response.json()
    assert body["status"] == "FAILURE", body
    assert body["data"] is None, body
    error: dict[str, Any] = body["error"]
    return error


def success_data(response: httpx.Response) -> Any:
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "SUCCESS", body
    assert body["error"] is None, body
    return body["data"]
