"""Jobs for the redis monitors: action, stats and zookeeper requests, one stream entry each.

Scrapy Cluster keyed these by request type (`info:<spider>:<appid>`), so two identical requests
collided and one client never got an answer; redis monitors found them with SCAN over the whole
keyspace. Here each request is an entry of the stream `shoal:jobs` carrying its own uuid, the
monitors read it as the consumer group `redis-monitors` (each job is delivered to one monitor,
and stays pending until acknowledged, so a dead monitor's jobs are claimed by another), and a
kafka monitor's replay of the same message adds nothing (a marker per topic/partition/offset).

Entry fields: kind (action|stats|zookeeper), uuid, appid, request (the validated JSON), origin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import ujson

from utils.frontier import keys
from utils.frontier.scripts import source

MARKER_TTL = 7 * 86400  # seconds a replayed message is recognised (longer than any Kafka replay)
STREAM_MAXLEN = 1_000_000  # entries kept in the stream (acknowledged ones are deleted at once)


@dataclass(frozen=True)
class Job:
    entry_id: str
    kind: str
    uuid: str
    appid: str
    request: dict[str, Any]
    origin: str
    received: float
    deliveries: int = 1

    @classmethod
    def from_entry(cls, entry_id: bytes | str, fields: dict[Any, Any], deliveries: int = 1) -> Job:
        f = {_text(k): _text(v) for k, v in fields.items()}
        return cls(
            entry_id=_text(entry_id),
            kind=f["kind"],
            uuid=f["uuid"],
            appid=f["appid"],
            request=ujson.loads(f["request"]),
            origin=f.get("origin", ""),
            received=float(f.get("received", 0)),
            deliveries=deliveries,
        )


def add_job(pipe: Any, kind: str, request: dict[str, Any], origin: str) -> None:
    """Queue the add of a job on a pipeline (the kafka monitor's batch pipeline)."""
    fields = {
        "kind": kind,
        "uuid": request["uuid"],
        "appid": request["appid"],
        "request": ujson.dumps(request, ensure_ascii=False),
        "origin": origin,
        "received": f"{time.time():.6f}",
    }
    argv: list[Any] = [MARKER_TTL, STREAM_MAXLEN]
    for name, value in fields.items():
        argv.extend((name, value))
    # A plain EVAL command: Redis Cluster pipelines refuse `pipe.eval`; both keys share one slot.
    pipe.execute_command("EVAL", source("add_job", "utils.jobs"), 2, keys.job_marker(origin), keys.JOBS, *argv)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
