"""The dashboard's "Sites pushing back" card (issue 33): domains above level 0 of their ladder, and
the alert conditions of docker/prometheus/alerts.yml that Redis alone can tell.

Each is read as it stands (rest/alerting.py adds the Kafka ones and applies the rules' `for:`), so
an operator without Prometheus still sees a paused domain, a spider with work and no crawler, a
spider with work that crawled nothing for 15 minutes (from the crawlers' time-bucketed response
counters in Redis), or a Redis near its `maxmemory`.
Bounded: at most DOMAINS_SHOWN domains per spider are read.
"""

from __future__ import annotations

from typing import Any

from utils.config.clients import RedisClient
from utils.frontier import keys
from utils.frontier.ladder import Ladder
from utils.observability import stats
from utils.observability.stats import StatsConfig

DOMAINS_SHOWN = 20  # per spider, highest levels first
MEMORY_SHARE = 0.9  # ShoalRedisMemoryNearLimit's threshold
NO_PROGRESS_WINDOW = 900  # seconds; ShoalCrawlNoProgress's increase(shoal_pages_total[15m])
CRAWLER_STATS = "stats:crawler:"  # `stats:crawler:<host>:<spiderid>:<status>` (crawler/stats.py)


def build(redis: RedisClient, queued_spiders: list[dict[str, Any]], heartbeat_ttl: int,
          stats_bucket: int) -> dict[str, Any]:  # fmt: skip
    domains = ladder_domains(redis)
    conditions = [{"alert": "ShoalDomainPaused", "spiderid": d["spiderid"], "detail": f"{d['domain']} is paused"}
                  for d in domains if d["level"] >= 4]  # fmt: skip
    conditions += no_live_spider(redis, queued_spiders, heartbeat_ttl)
    conditions += no_progress(redis, queued_spiders, stats_bucket)
    conditions += redis_memory(redis)
    return {"domains": domains, "conditions": conditions}


def ladder_domains(redis: RedisClient) -> list[dict[str, Any]]:
    ladder = Ladder(redis, 0, 0)
    shown = []
    for raw in sorted(redis.smembers(keys.SPIDERS)):
        spiderid = raw.decode() if isinstance(raw, bytes) else str(raw)
        levels = sorted(((level, d) for d, level in ladder.domains(spiderid).items() if level > 0), reverse=True)
        for _, domain in levels[:DOMAINS_SHOWN]:
            state = ladder.state(spiderid, domain)
            shown.append({k: state[k] for k in ("spiderid", "domain", "level", "state", "since", "reason")}
                         | {"steps": len(state["history"])})  # fmt: skip
    return shown


def no_live_spider(redis: RedisClient, queued_spiders: list[dict[str, Any]], ttl: int) -> list[dict[str, Any]]:
    """ShoalNoLiveSpider: a spider with queued domains and no crawler heartbeat within `ttl`."""
    live = {pid.split(":", 1)[0] for ids in stats.live_processes(redis, "crawler", ttl).values() for pid in ids}
    return [{"alert": "ShoalNoLiveSpider", "spiderid": s["spiderid"],
             "detail": f"{s['domains']} domain(s) with queued work, no live crawler"}
            for s in queued_spiders if s["domains"] and s["spiderid"] not in live]  # fmt: skip


def no_progress(redis: RedisClient, queued_spiders: list[dict[str, Any]], bucket: int) -> list[dict[str, Any]]:
    """ShoalCrawlNoProgress: a spider with queued domains whose crawlers counted responses before
    (a lifetime) but none within NO_PROGRESS_WINDOW. A spider that never crawled is left out: its
    first pages may be on their way (and with no crawler alive, ShoalNoLiveSpider says so)."""
    waiting = {s["spiderid"] for s in queued_spiders if s["domains"]}
    if not waiting:
        return []
    config = StatsConfig([NO_PROGRESS_WINDOW], bucket, 0)
    seen: dict[str, tuple[int, int]] = {}  # spiderid -> (responses in the window, lifetime)
    for base in stats.stat_bases(redis, CRAWLER_STATS):
        spiderid = base.rsplit(":", 2)[-2]
        if spiderid in waiting:
            counts = stats.read_counter(redis, base, config)
            recent, lifetime = seen.get(spiderid, (0, 0))
            seen[spiderid] = (recent + counts.get(str(NO_PROGRESS_WINDOW), 0), lifetime + counts.get("lifetime", 0))
    return [{"alert": "ShoalCrawlNoProgress", "spiderid": spiderid,
             "detail": f"queued work, no page crawled in {NO_PROGRESS_WINDOW // 60} minutes"}
            for spiderid, (recent, lifetime) in sorted(seen.items()) if lifetime and not recent]  # fmt: skip


def redis_memory(redis: RedisClient) -> list[dict[str, Any]]:
    """ShoalRedisMemoryNearLimit: used over MEMORY_SHARE of a set `maxmemory`."""
    memory = redis.info("memory")
    used, limit = float(memory.get("used_memory", 0)), float(memory.get("maxmemory", 0))
    if not limit or used / limit <= MEMORY_SHARE:
        return []
    detail = f"{100 * used / limit:.0f} % of maxmemory"
    return [{"alert": "ShoalRedisMemoryNearLimit", "spiderid": None, "detail": detail}]
