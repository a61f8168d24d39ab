"""The session's three-master Redis Cluster: started on first use, emptied between tests, stopped at the end.

A pytest plugin module: `pytest_plugins = ["tests.support.redis_cluster"]` in tests/conftest.py
makes its fixtures visible everywhere. Redis Cluster has only database 0, so tests cannot take a
database of their own as they do on the single Redis: `redis_cluster_client` empties every master
(`RedisClusterHandle.flush`) before and after its test instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from utils.services import ServiceError
from utils.services.redis_cluster import RedisClusterHandle, start_redis_cluster


def _start_or_explain(run_dir: Path) -> RedisClusterHandle | str:
    """The started cluster, or why it did not start (with the failing node's log tail)."""
    try:
        return start_redis_cluster(run_dir)
    except ServiceError as exc:
        return f"Redis Cluster did not start:\n{exc}"


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterHandle]:
    """Three masters on free ports, started the first time a test asks, stopped at the session's end."""
    started = _start_or_explain(tmp_path_factory.mktemp("redis-cluster"))
    if isinstance(started, str):
        pytest.fail(started, pytrace=False)  # outside the except: no chained traceback to read past
    yield started
    started.stop()


@pytest.fixture
def redis_cluster_client(redis_cluster: RedisClusterHandle) -> Iterator[redis.RedisCluster]:
    """A bytes-returning client of the emptied session cluster; emptied again after the test."""
    redis_cluster.flush()
    client = redis_cluster.client()
    yield client
    client.close()
    redis_cluster.flush()
