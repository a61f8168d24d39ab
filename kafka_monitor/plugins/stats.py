"""Stats requests (every kind): jobs for the redis monitors."""

from __future__ import annotations

from typing import TypedDict

from kafka_monitor.plugins.jobs import JobHandler


class StatsRequest(TypedDict, total=False):
    """utils/schemas/stats.json (tests check the keys match)."""

    uuid: str
    appid: str
    stats: str


class StatsHandler(JobHandler):
    """Scrapy Cluster's StatsHandler, without its collisions: each request is its own job."""

    schema = "stats"
    kind = "stats"
    event = "Added stat request to Redis"
