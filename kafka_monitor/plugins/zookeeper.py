"""Zookeeper requests (domain and blacklist updates): jobs for the redis monitors."""

from __future__ import annotations

from typing import Any, TypedDict

from kafka_monitor.plugins.jobs import JobHandler
from utils.config.errors import InvalidMessage


class ZookeeperRequest(TypedDict, total=False):
    """utils/schemas/zookeeper.json (tests check the keys match)."""

    uuid: str
    appid: str
    domain: str
    action: str
    hits: int
    window: int
    scale: float


class ZookeeperHandler(JobHandler):
    """Scrapy Cluster's ZookeeperHandler; a domain-update it dropped unanswered is refused here."""

    schema = "zookeeper"
    kind = "zookeeper"
    event = "Added zookeeper action to Redis"

    def check(self, message: dict[str, Any]) -> None:
        # Scrapy Cluster logged this and stored nothing; a non-positive limit would stop the domain.
        if message["action"] == "domain-update" and (message["hits"] <= 0 or message["window"] <= 0):
            raise InvalidMessage(
                "'hits' and 'window' not set for domain update",
                cause=f"hits ({message['hits']}) and window ({message['window']}) must both be above 0",
            )
