"""What the dashboard shows, in one JSON document: crawls, rates, queues, processes, errors.

Everything is read through registries (`shoal:crawls`, `shoal:spiders`, `<sid>:heads`, the
heartbeat index) and bounded, so a dashboard left open costs a few pipelined reads per refresh.
"""

from __future__ import annotations

import time
from typing import Any

import ujson

from rest import pushback
from rest.apps_view import apps_view
from rest.gateway import Gateway
from utils.config.clients import RedisClient
from utils.frontier import keys, memory
from utils.frontier.shards import Shards, spider_shards
from utils.observability import stats
from utils.proxies.pool import ProxyPool, group_health

COMPONENTS = ("kafka-monitor", "crawler", "redis-monitor", "rest", "sink")
DOMAINS_PER_SPIDER = 200  # best-priority domains whose queue depth is read
TOP_DOMAINS = 12  # deepest queues shown
CRAWLS_SHOWN = 30
DEAD_LETTER_CRAWLS = 20  # crawls whose newest dead letters are read
RECENT = 10  # errors and dead letters shown
RENDERERS_SHOWN = 20  # render processes listed
LATE_AFTER = 30.0  # seconds without a heartbeat (processes beat every 5 s) before a process shows as late
ERROR_FIELDS = ("uuid", "appid", "error", "server_time", "received")
DEAD_FIELDS = ("url", "appid", "crawlid", "error", "status_code", "attempts", "dead_ts")


def build(gw: Gateway) -> dict[str, Any]:
    now = time.time()
    crawls = sorted(gw.sampler.snapshots(now), key=lambda c: (c["finished"], -(c["started"] or 0)))
    running = [c for c in crawls if not c["finished"]]
    queues = queue_depths(gw.redis, Shards.from_settings(gw.settings))
    return {
        "server_time": now,
        "health": gw.health.index(),
        "processes": processes(gw.redis, gw.settings.get_int("HEARTBEAT_TIMEOUT")),
        "totals": {  # rates of the running crawls; counters of every crawl of the last CRAWL_STATE_TIMEOUT
            "running": len(running),
            "pages_per_sec": round(sum(c["pages_per_sec"] for c in running), 2),
            **{name: sum(c[name] for c in crawls) for name in ("queued", "inflight", "retrying", "crawled")},
            "failed": sum(c["failed"] + c["dead"] for c in crawls),
        },
        "crawls": crawls[:CRAWLS_SHOWN],
        "chart": gw.sampler.chart(),
        "chart_seconds": gw.settings.get_int("REST_CHART_SECONDS"),
        "queues": queues,
        "errors": [{k: e.get(k) for k in ERROR_FIELDS} for e in list(gw.outbound.recent_errors)[:RECENT]],
        "dead_letters": recent_dead_letters(gw.redis, crawls[:DEAD_LETTER_CRAWLS]),
        **proxy_cards(gw, now),
        "renderers": renderers(gw.redis, now, gw.settings.get_int("HEARTBEAT_TIMEOUT")),
        "pushback": alert_card(gw, queues["spiders"]),
        "apps": apps_view(gw)["apps"],
        "memory": redis_memory_card(gw.redis, sum(c[n] for c in crawls for n in ("queued", "inflight", "retrying"))),
    }


def redis_memory_card(redis: RedisClient, requests: int) -> dict[str, Any]:
    """Redis's memory against its limit, and per request the frontier holds."""
    found = memory.redis_memory(redis)
    return {"used": found.used, "limit": found.limit, "policy": found.policy,
            "bytes_per_request": memory.per_request(found, requests)}  # fmt: skip


def proxy_cards(gw: Gateway, now: float) -> dict[str, list[dict[str, Any]]]:
    """The pool's proxies and the health of each group of labels ([] without PROXY_LIST)."""
    rows = ProxyPool.from_settings(gw.settings, gw.redis).state(now)
    return {"proxies": rows, "proxy_groups": group_health(rows)}


def alert_card(gw: Gateway, queued_spiders: list[dict[str, Any]]) -> dict[str, Any]:
    """Issue 33: the pushback card's domains and conditions, the Kafka ones added, each pending or firing."""
    card = pushback.build(gw.redis, queued_spiders, gw.settings.get_int("HEARTBEAT_TIMEOUT"),
                          gw.settings.get_int("STATS_BUCKET"))  # fmt: skip
    card["conditions"] = gw.alerts.conditions(card["conditions"], gw.health.kafka_connected)
    return card


def processes(redis: RedisClient, ttl: int) -> dict[str, dict[str, Any]]:
    """Per component: how many processes beat within `ttl`, on which hosts, which services some of
    them cannot reach and how many are late (see stats.process_health)."""
    found = {}
    for component in COMPONENTS:
        nodes = stats.live_processes(redis, component, ttl)
        found[component] = {"count": sum(len(ids) for ids in nodes.values()), "hosts": sorted(nodes),
                            **stats.process_health(redis, component, ttl, LATE_AFTER)}  # fmt: skip
    return found


def renderers(redis: RedisClient, now: float, ttl: int) -> list[dict[str, Any]]:
    """Each live render process's figures (`crawler/render_stats.py`): pages/s, memory, restarts."""
    members = redis.zrangebyscore(keys.RENDERERS, now - ttl, "+inf")[:RENDERERS_SHOWN]
    pipe = redis.pipeline(transaction=False)
    for member in members:
        pipe.hgetall(keys.render_figures(*_text(member).rsplit(":", 1)))
    found = []
    for member, figures in zip(members, pipe.execute(), strict=True):
        values = {_text(k): _text(v) for k, v in figures.items()}
        if values:
            found.append({"process": _text(member), **{k: _number(v) for k, v in values.items()}})
    return found


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def queue_depths(redis: RedisClient, shards: Shards | None = None) -> dict[str, Any]:
    """The deepest domain queues, and per spider its domains with work and requests in flight."""
    spiders = sorted(redis.smembers(keys.SPIDERS))
    pairs = spider_shards(spiders, shards or Shards.for_client(redis))
    pipe = redis.pipeline(transaction=False)
    for _, prefix in pairs:
        pipe.zrange(keys.heads(prefix), 0, DOMAINS_PER_SPIDER - 1)
        pipe.zcard(keys.heads(prefix))
        pipe.zcard(keys.inflight(prefix))
    replies = pipe.execute()
    rows: list[tuple[str, str, str]] = []
    totals = {sid: {"spiderid": sid, "domains": 0, "inflight": 0} for sid in spiders}
    for i, (sid, prefix) in enumerate(pairs):
        domains, n_domains, inflight = replies[3 * i : 3 * i + 3]
        rows.extend((sid, prefix, d) for d in domains)
        totals[sid]["domains"] += n_domains
        totals[sid]["inflight"] += inflight
    summary = list(totals.values())
    pipe = redis.pipeline(transaction=False)
    for _, prefix, domain in rows:
        pipe.zcard(keys.queue(prefix, domain))
    depths = [
        {"spiderid": sid, "domain": domain, "queued": n}
        for (sid, _, domain), n in zip(rows, pipe.execute(), strict=True)
        if n
    ]
    depths.sort(key=lambda row: -row["queued"])
    return {"spiders": summary, "domains": depths[:TOP_DOMAINS]}


def recent_dead_letters(redis: RedisClient, crawls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pipe = redis.pipeline(transaction=False)
    for crawl in crawls:
        pipe.lrange(keys.dead_letters(crawl["spiderid"], crawl["appid"], crawl["crawlid"]), 0, RECENT - 1)
    letters = []
    for raw in (item for items in pipe.execute() for item in items):
        try:
            letter = ujson.loads(raw)
        except ValueError:
            continue
        if isinstance(letter, dict):
            letters.append({k: letter.get(k) for k in DEAD_FIELDS})
    letters.sort(key=lambda letter: -(letter.get("dead_ts") or 0))
    return letters[:RECENT]
