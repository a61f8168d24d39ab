"""Dead-letter actions: list, replay and purge a crawl's dead letters (Shoal's additions to §3.2).

Records live in `<sid>:crawl:<appid>:<crawlid>:dead` (utils/frontier/dead_letters.py, newest first).
Replay queues each request again with its attempt count reset, through the frontier's enqueue
(as a seed: neither the dupefilter nor a stop refuses a request the client asked back), then
removes exactly the records it read; a crash in between replays them twice at worst.
"""

from __future__ import annotations

import logging
from typing import Any

import ujson

from redis_monitor.context import Context
from redis_monitor.plugins.base import action_answer, is_action
from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.frontier.domains import url_domain
from utils.jobs.stream import Job
from utils.schemas import answers

log = logging.getLogger(__name__)

LIST_MAX = 1000  # records in one "dead-letters" answer (newest first); total_dead_letters gives all
REPLAY_CHUNK = 1000  # records per enqueue call
RETRY_STATE = ("attempt", "blocks", "not_before")  # stored fields a replay resets


class DeadLetterMonitor:
    rank = 600

    def __init__(self, client: RedisClient, frontier: Frontier) -> None:
        self.redis = client
        self.frontier = frontier

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> DeadLetterMonitor:
        return cls(context.redis, Frontier.from_settings(settings, context.redis))

    def accepts(self, job: Job) -> bool:
        return is_action(job, "dead-letters", "replay-dead-letters", "purge-dead-letters")

    def handle(self, job: Job) -> list[dict[str, Any]]:
        request = job.request
        log.info(
            "Received dead-letter request",
            extra={
                "appid": job.appid,
                "uuid": job.uuid,
                "action": request["action"],
                "crawlid": request.get("crawlid"),
            },
        )
        if not request.get("crawlid"):
            return [answers.error_answer(request, "Dead-letter requests need a crawlid and appid", "crawlid: missing")]
        key = keys.dead_letters(request["spiderid"], job.appid, request["crawlid"])
        if request["action"] == "dead-letters":
            records = [ujson.loads(r) for r in self.redis.lrange(key, 0, LIST_MAX - 1)]
            return [action_answer(job, dead_letters=records, total_dead_letters=self.redis.llen(key))]
        if request["action"] == "purge-dead-letters":
            pipe = self.redis.pipeline(transaction=True)
            pipe.llen(key)
            pipe.delete(key)
            purged = pipe.execute()[0]
            return [action_answer(job, total_purged=purged)]
        return [action_answer(job, total_replayed=self.replay(key, request["spiderid"], job.appid, request["crawlid"]))]

    def replay(self, key: str, spiderid: str, appid: str, crawlid: str) -> int:
        raw = self.redis.lrange(key, 0, -1)
        replayed = 0
        for start in range(0, len(raw), REPLAY_CHUNK):
            requests = [r for r in (_request_of(ujson.loads(x)) for x in raw[start : start + REPLAY_CHUNK]) if r]
            replayed += sum(s == "queued" for s in self.frontier.enqueue(requests))
        pipe = self.redis.pipeline(transaction=False)  # two slots on a Redis Cluster
        pipe.ltrim(key, 0, -len(raw) - 1)  # newer records were pushed in front: keep those
        progress = self.frontier.shards.tags[0] + keys.crawl_progress(spiderid, appid, crawlid)  # summed over shards
        pipe.hincrby(progress, "dead", -replayed)
        pipe.hincrby(progress, "replayed", replayed)
        pipe.hdel(progress, "finished")  # it may finish (and be announced) again
        pipe.execute()
        return replayed


def _request_of(record: dict[str, Any]) -> NewRequest | None:
    """The stored request of a dead-letter record, ready to queue again with attempt 0."""
    stored = record.get("request")
    if not isinstance(stored, dict) or not stored.get("url"):
        return None
    stored = {k: v for k, v in stored.items() if k not in RETRY_STATE}
    domain = url_domain(stored["url"])
    if not domain:
        return None
    return NewRequest(
        spiderid=stored.get("spiderid") or record["spiderid"],
        domain=domain,
        priority=int(stored.get("priority", 1)),
        appid=stored.get("appid") or record["appid"],
        crawlid=stored.get("crawlid") or record["crawlid"],
        **crawl_request.encode(stored)._asdict(),
        fingerprint=None,
        seed=True,
    )
