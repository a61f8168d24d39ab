"""Helpers shared by the redis monitor's tests (no tests here): jobs, crawls, monitors, answers."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from redis_monitor.monitor import RedisMonitor
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from utils.config.clients import redis_client
from utils.frontier import Frontier, NewRequest, crawl_request
from utils.jobs.stream import add_job

_origins = itertools.count()


def add_jobs(client: redis.Redis, kind: str, requests: Iterable[dict[str, Any]]) -> None:
    """Jobs as the kafka monitor adds them: one stream entry each, with a unique origin."""
    pipe = client.pipeline(transaction=False)
    for request in requests:
        add_job(pipe, kind, request, f"test/{uuid.uuid4().hex[:6]}/{next(_origins)}")
    pipe.execute()


def new_uuid() -> str:
    return uuid.uuid4().hex[:12]


def seed(
    frontier: Frontier, appid: str, crawlid: str, urls: Iterable[tuple[str, str, int]], spiderid: str = "link"
) -> list[str]:
    """Queue (url, domain, priority) requests for a crawl; returns the statuses."""
    requests = []
    for url, domain, priority in urls:
        record = crawl_request.to_record(
            {"url": url, "appid": appid, "crawlid": crawlid, "spiderid": spiderid, "priority": priority}
        )
        stored = crawl_request.encode(record)._asdict()
        requests.append(NewRequest(spiderid, domain, priority, appid, crawlid, fingerprint=None, seed=True, **stored))
    return frontier.enqueue(requests)


def frontier_of(cluster: TestCluster, lease_timeout: float = 120.0) -> Frontier:
    return Frontier(redis_client(cluster.settings, decode=True), lease_timeout=lease_timeout)


@contextmanager
def running_monitor(cluster: TestCluster, **overrides: Any) -> Iterator[RedisMonitor]:
    """An in-process redis monitor on the test's settings; closed afterwards."""
    monitor = RedisMonitor.from_settings(cluster.settings.copy_with(**overrides))
    try:
        yield monitor
    finally:
        monitor.close()


def drive(monitor: RedisMonitor, until: Callable[[], Any], timeout: float = 20) -> Any:
    """Run monitor rounds until `until()` is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while True:
        monitor.run_once()
        result = until()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")


def answered(reader: TopicReader, uuids: Iterable[str]) -> Callable[[], dict[str, dict[str, Any]]]:
    """A condition for `drive`: every uuid answered on the reader's topic -> {uuid: answer}."""
    wanted = set(uuids)

    def check() -> dict[str, dict[str, Any]]:
        reader.poll(0.1)
        found = {m["uuid"]: m for m in reader.messages if isinstance(m, dict) and m.get("uuid") in wanted}
        return found if set(found) == wanted else {}

    return check
