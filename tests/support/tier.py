"""The disk tier in tests: a DiskTier over a test's Redis backend and the session PostgreSQL, its own table."""

from __future__ import annotations

import uuid
from typing import Any

import redis
from psycopg import conninfo

from tests.support.postgres import Postgres
from utils.frontier.tier import DiskTier


def text_client(client: Any) -> Any:
    """A client of the same Redis (or Redis Cluster) as `client` that decodes replies to str."""
    if isinstance(client, redis.RedisCluster):
        node = client.get_default_node()
        return redis.RedisCluster(host=node.host, port=node.port, decode_responses=True)
    kwargs = client.connection_pool.connection_kwargs
    return redis.Redis(host=kwargs["host"], port=kwargs["port"], db=kwargs.get("db", 0), decode_responses=True)


def tier_dsn(postgres: Postgres) -> str:
    """The session PostgreSQL's DSN with its password, as FRONTIER_DISK_TIER_DSN takes it."""
    return conninfo.make_conninfo(postgres.dsn, password=postgres.password)


def disk_tier(client: Any, postgres: Postgres, window: int, table: str | None = None) -> DiskTier:
    """A DiskTier with a table of its own (`table`: another DiskTier's, to share its rows)."""
    return DiskTier(text_client(client), tier_dsn(postgres), window, table=table or f"tail_{uuid.uuid4().hex[:10]}",
                    partitions=4)  # fmt: skip
