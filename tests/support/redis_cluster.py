"""The session's three-master Redis Cluster: started on first use, emptied between tests, stopped at the end.

A pytest plugin module: `pytest_plugins = ["tests.support.redis_cluster"]` in tests/conftest.py
makes its fixtures visible everywhere. Redis Cluster has only database 0, so tests cannot take a
database of their own as they do on the single Redis: `redis_cluster_client` empties every master
(`RedisClusterHandle.flush`) before and after its test instead.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.services import started_or_fail
from utils.services.redis_cluster import RedisClusterHandle, start_redis_cluster


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterHandle]:
    """Three masters on free ports, started the first time a test asks, stopped at the session's end."""
    run_dir = tmp_path_factory.mktemp("redis-cluster")
    started = started_or_fail(lambda: start_redis_cluster(run_dir), "Redis Cluster")
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
