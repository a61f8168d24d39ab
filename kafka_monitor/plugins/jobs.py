"""The request kinds the redis monitors carry out: each accepted message becomes one job.

Scrapy Cluster wrote `info:<spider>:<appid>`-style keys, so two identical requests collided and
one requester never got an answer; a job here is an entry of the stream `shoal:jobs` with the
request's own uuid, added once per topic/partition/offset (utils.jobs.stream), so a replay adds nothing.
"""

from __future__ import annotations

from typing import Any

from kafka_monitor.batch import Batch, Command, Origin
from utils.config.settings import Settings
from utils.jobs.stream import add_job


class JobHandler:
    """Validated request -> job of `kind`; `check` refuses what Scrapy Cluster never answered."""

    schema = ""
    kind = ""
    event = ""
    rank = 0

    @classmethod
    def from_settings(cls, settings: Settings, **_: Any) -> JobHandler:
        return cls()

    def check(self, message: dict[str, Any]) -> None:
        """Raise InvalidMessage for a request that matches the schema but cannot be carried out."""

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        self.check(message)
        message["ts"] = batch.ts
        batch.commands.append(_job_command(self.kind, message, origin.identity))
        batch.log(self.event, message)


def _job_command(kind: str, request: dict[str, Any], origin: str) -> Command:
    return lambda pipe: add_job(pipe, kind, request, origin)
