"""What a crawl has waiting in the frontier, read through its index: O(requests of the crawl).

Scrapy Cluster scanned every queue of the spider and decoded every member for each info request
(its issue #53: hours at 1M queued). Here the crawl's domain index `<sid>:crawl:<appid>:<crawlid>:domains`
names the hashes that hold exactly its requests (`...:requests:<domain>`, `<id>` -> payload), so the
cost is a few pipelined calls per 5,000 of them.
Pending means queued or waiting to retry; requests in flight are counted in the progress.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from utils.config.clients import RedisClient
from utils.frontier import crawl_request, keys, progress
from utils.frontier.fingerprint import false_drop_now
from utils.frontier.progress import CrawlRef
from utils.frontier.shards import Shards
from utils.frontier.tier import DiskTier

CHUNK = 5000  # members per ZMSCORE call, domains per SSCAN page
DOMAINS_PER_CALL = 500  # requests hashes read per pipeline (~100 requests each)


@dataclass
class DomainPending:
    total: int = 0
    high_priority: int = -9999  # Scrapy Cluster's starting values
    low_priority: int = 9999

    def add(self, priority: int) -> None:
        self.total += 1
        self.high_priority = max(self.high_priority, priority)
        self.low_priority = min(self.low_priority, priority)

    def view(self) -> dict[str, int]:
        return {"total": self.total, "high_priority": self.high_priority, "low_priority": self.low_priority}


def pending_by_domain(client: RedisClient, ref: CrawlRef, shards: Shards | None = None) -> dict[str, DomainPending]:
    """Each domain's queued and delayed requests of the crawl, with their priority range.

    A domain lives in one frontier shard, so the shards' answers never overlap.
    """
    found: dict[str, DomainPending] = defaultdict(DomainPending)
    for tag in (shards or Shards.for_client(client)).tags:
        sid = tag + ref.spiderid  # the shard's keys: its tag in front of the spider's key names
        code = client.hget(keys.crawl_codes(sid), f"{ref.appid}\t{ref.crawlid}")
        if code is None:
            continue
        members: dict[str, list[str]] = defaultdict(list)  # domain -> queue members
        payloads: dict[str, str] = {}  # `<domain>\t<member>` -> stored request
        domains = list(client.sscan_iter(keys.crawl_domains(sid, ref.appid, ref.crawlid), count=CHUNK))
        for start in range(0, len(domains), DOMAINS_PER_CALL):
            chunk = domains[start : start + DOMAINS_PER_CALL]
            pipe = client.pipeline(transaction=False)
            for domain in chunk:
                pipe.hgetall(keys.crawl_requests(sid, ref.appid, ref.crawlid, domain))
            for domain, stored in zip(chunk, pipe.execute(), strict=True):
                for request_id, payload in stored.items():
                    members[domain].append(request_id + code)
                    payloads[f"{domain}\t{request_id}{code}"] = payload
        not_queued = _add_queued(client, sid, members, found)
        _add_delayed(client, sid, not_queued, payloads, found)
    return dict(found)


def _add_queued(
    client: RedisClient, sid: str, ids: dict[str, list[str]], found: dict[str, DomainPending]
) -> dict[str, list[str]]:
    """Count the queued ones (priority = -score); the others are delayed or in flight."""
    pipe = client.pipeline(transaction=False)
    batches = [(d, chunk) for d, members in ids.items() for chunk in _chunks(members)]
    for domain, chunk in batches:
        pipe.zmscore(keys.queue(sid, domain), chunk)
    rest: dict[str, list[str]] = defaultdict(list)
    for (domain, chunk), scores in zip(batches, pipe.execute() if batches else [], strict=True):
        for member, score in zip(chunk, scores, strict=True):
            if score is None:
                rest[domain].append(member)
            else:
                found[domain].add(int(-score))
    return rest


def _add_delayed(
    client: RedisClient,
    sid: str,
    ids: dict[str, list[str]],
    payloads: dict[str, str],
    found: dict[str, DomainPending],
) -> None:
    """Count the ones waiting to retry; their priority is in the stored request."""
    entries = [f"{d}\t{m}" for d, chunk in ids.items() for m in chunk]
    pipe = client.pipeline(transaction=False)
    for chunk in _chunks(entries):
        pipe.zmscore(keys.delayed(sid), chunk)
    for chunk, scores in zip(_chunks(entries), pipe.execute() if entries else [], strict=True):
        for entry, score in zip(chunk, scores, strict=True):
            if score is not None:
                domain = entry.partition("\t")[0]
                found[domain].add(int(crawl_request.decode(payloads[entry]).get("priority", 1)))


def progress_view(client: RedisClient, ref: CrawlRef, shards: Shards | None = None) -> dict[str, Any]:
    """The crawl's progress with pages/s and ETA (utils.frontier.progress, as the REST gateway shows it)."""
    read = progress.read(client, ref, shards) or progress.Progress(ref, {}, {})
    return progress.snapshot(read)


def crawl_view(
    client: RedisClient, ref: CrawlRef, shards: Shards | None = None, tier: DiskTier | None = None
) -> dict[str, Any]:
    """total, domains and distinct_domains of one crawl (the body of both info answers); with the
    disk tier, its tail counts too, both read while no request moves between the tiers."""
    if tier is None:
        domains = pending_by_domain(client, ref, shards)
    else:
        with tier.holding(ref.spiderid):
            domains = pending_by_domain(client, ref, shards)
            for name, (count, high, low) in tier.crawl_domains(ref).items():
                pending = domains.setdefault(name, DomainPending())
                pending.total += count
                pending.high_priority = max(pending.high_priority, high)
                pending.low_priority = min(pending.low_priority, low)
    return {
        "total": sum(d.total for d in domains.values()),
        "domains": {name: d.view() for name, d in sorted(domains.items())},
    }


def _chunks(items: list[Any]) -> list[list[Any]]:
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


def dupefilter_view(client: RedisClient, ref: CrawlRef, shards: Shards | None = None) -> dict[str, Any]:
    """Which dupefilter a crawl has now and its expected error (`info`): `exact` (8-byte fingerprints,
    false drops ~n/2^64, taken as 0) or `bloom` once past DUPEFILTER_EXACT_MAX (lua/lib/seen.lua),
    with `seen` URLs and `false_drop_rate`, the chance that a new URL is dropped as seen (the
    worst shard's on a Redis Cluster; a fixed-size Bloom filter, mode bloom, has no count: None)."""
    mode, seen, worst = "exact", 0, 0.0
    for tag in (shards or Shards.for_client(client)).tags:
        sid = tag + ref.spiderid
        pipe = client.pipeline(transaction=False)
        pipe.scard(keys.dupefilter(sid, ref.crawlid))
        pipe.hgetall(keys.dupefilter_stages(sid, ref.crawlid))
        pipe.exists(keys.bloom_dupefilter(sid, ref.crawlid))
        exact, state, fixed = pipe.execute()
        state = {_text(k): int(v) for k, v in state.items()}
        stages = [(state[f"m{i}"], state[f"k{i}"], _held(state, i)) for i in range(state.get("n", 0))]
        seen += int(exact) + sum(held for _, _, held in stages)
        if stages or fixed:
            mode = "bloom"
        worst = max(worst, false_drop_now(stages))
        if fixed and not stages:
            return {"mode": "bloom", "seen": None, "false_drop_rate": None}
    return {"mode": mode, "seen": seen, "false_drop_rate": float(f"{worst:.3g}")}


def _held(state: dict[str, int], stage: int) -> int:
    """URLs in a stage: the newest says (`a`); an older one is full (lua/lib/seen.lua opens a stage then)."""
    return state.get("a", 0) if stage == state["n"] - 1 else state[f"c{stage}"]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
