"""The crawl frontier in Redis: enqueue through the filters, leased pops under the throttle, settling.

Each operation is one Lua call per frontier shard (utils/frontier/lua; one shard on a single Redis, see
utils/frontier/shards.py), so a batch of requests costs one round trip whatever its size; `Frontier.settle`
writes a spider's found links, retries, dead letters and acks in one pipeline. `round_trips` counts
every pipeline sent, for the "≤ 3 round trips per page" target (DESIGN.md). On a Redis Cluster a
pipeline reaches every master at once (redis-py writes to all of them before reading).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from redis.exceptions import NoScriptError

from utils.config.clients import RedisClient
from utils.config.settings import Settings
from utils.frontier import dead_letters, keys
from utils.frontier.fingerprint import bloom_size
from utils.frontier.pop_planner import PopPlanner
from utils.frontier.protocol import LateFetch, PopCall, decode_pop, text
from utils.frontier.scripts import Scripts, evalsha_in
from utils.frontier.shards import Shards
from utils.frontier.types import Ack, Lease, NewRequest, Popped, Retry, Settlement, ThrottlePolicy
from utils.frontier.weights import AppPolicy

__all__ = ["Ack", "Frontier", "Lease", "NewRequest", "Popped", "Retry", "Settlement", "ThrottlePolicy"]

DUPEFILTER_MODES = ("auto", "exact", "bloom")
WAKE_TTL = 60  # seconds a wake-up token waits for a crawler (lua/lib/wake.lua: WAKE_TTL)
T = TypeVar("T")


class Frontier:
    """Typed wrappers around the frontier scripts of one Redis client (or Redis Cluster client)."""

    def __init__(
        self,
        client: RedisClient,
        dupefilter_timeout: int = 600,
        state_timeout: int = 86400,
        domain_page_timeout: int = 600,
        global_page_limit: int = 0,
        global_page_timeout: int = 600,
        lease_timeout: float = 15.0,
        dupefilter_mode: str = "auto",
        bloom: tuple[int, int] = (14_377_619, 10),
        shards: Shards | None = None,
        exact_max: int = 100_000,
        false_drop: float = 1e-6,
        window: int = 0,
        weight: float = 1.0,
        slot_shares: bool = True,
    ) -> None:
        if dupefilter_mode not in DUPEFILTER_MODES:
            raise ValueError(f"dupefilter mode {dupefilter_mode!r} is not one of {DUPEFILTER_MODES}")
        self.client = client
        self.scripts = Scripts(client)
        self.shards = shards or Shards.for_client(client)
        self.lease_timeout = lease_timeout
        self.state_timeout = state_timeout
        self.round_trips = 0
        self.exact_max, self.false_drop = exact_max, false_drop  # mode auto (lua/lib/seen.lua)
        self.window = window  # the disk tier's window per domain (lua/lib/tier.lua); 0 = no disk tier
        self._planners: dict[str, PopPlanner] = {}  # spiderid -> which shards its pops go to
        self.apps = AppPolicy(client, weight)  # apps' weights and lease-time quotas (ZooKeeper, through Redis)
        self.slot_shares = slot_shares  # pops share the crawler slots between apps by weight (lib/app_limits.lua)
        self._enqueue_head = [
            dupefilter_timeout,
            state_timeout,
            domain_page_timeout,
            global_page_limit,
            global_page_timeout,
            dupefilter_mode,
            *bloom,
        ]

    @classmethod
    def from_settings(cls, settings: Settings, client: RedisClient) -> Frontier:
        return cls(
            client,
            dupefilter_timeout=settings.get_int("DUPEFILTER_TIMEOUT"),
            state_timeout=settings.get_int("CRAWL_STATE_TIMEOUT"),
            domain_page_timeout=settings.get_int("DOMAIN_MAX_PAGE_TIMEOUT"),
            global_page_limit=settings.get_int("GLOBAL_PAGE_PER_DOMAIN_LIMIT"),
            global_page_timeout=settings.get_int("GLOBAL_PAGE_PER_DOMAIN_LIMIT_TIMEOUT"),
            lease_timeout=settings.get_float("LEASE_TIMEOUT"),
            dupefilter_mode=settings.get_str("DUPEFILTER_MODE"),
            bloom=bloom_size(
                settings.get_int("DUPEFILTER_BLOOM_CAPACITY"), settings.get_float("DUPEFILTER_BLOOM_ERROR_RATE")
            ),
            shards=Shards.from_settings(settings),
            exact_max=settings.get_int("DUPEFILTER_EXACT_MAX"),
            false_drop=settings.get_float("DUPEFILTER_FALSE_DROP"),
            window=settings.get_int("FRONTIER_WINDOW") if settings.get_str("FRONTIER_DISK_TIER_DSN") else 0,
            weight=settings.get_float("CRAWL_WEIGHT"),
            slot_shares=settings.get_bool("APP_SLOT_SHARES"),
        )

    # --- enqueue ---------------------------------------------------------------------------------
    def enqueue(self, requests: Sequence[NewRequest]) -> list[str]:
        """Queue requests; one status each (queued, duplicate, page_limit, blacklist, expired, replayed)."""
        return self.settle(Settlement(requests=list(requests)))["requests"]

    def enqueue_in(self, pipe: Any, requests: Sequence[NewRequest]) -> list[list[int]]:
        """Add the enqueue calls to a pipeline: first one per shard (each reply is a list of
        statuses, in the shards' order), then the registry writes (integer replies). Returns, per
        enqueue call, the positions in `requests` of its statuses."""
        calls = []
        batch_us = _batch_us(self.shards.count)
        for tag, group, positions in self._tagged(requests, lambda r: self.shards.tag(r.domain)):
            args = self._enqueue_argv(tag, group, positions, batch_us)
            evalsha_in(pipe, self.scripts.enqueue, keys.shard_route(tag), args)
            calls.append(positions)
        self._register(pipe, requests)
        return calls

    def _register(self, pipe: Any, requests: Sequence[NewRequest]) -> None:
        """`shoal:spiders` and `shoal:crawls`: what the redis monitors look at (one key each)."""
        if not requests:
            return
        now = time.time()
        pipe.sadd(keys.SPIDERS, *{r.spiderid for r in requests})
        pipe.zadd(keys.CRAWLS, {keys.crawl_member(r.spiderid, r.appid, r.crawlid): now for r in requests})

    # --- pop -------------------------------------------------------------------------------------
    def pop(self, spiderid: str, max_items: int, throttle: ThrottlePolicy, scan_limit: int = 500) -> Popped:
        """Lease up to `max_items` requests of `spiderid`, best priority first, under the throttle.

        With several shards (Redis Cluster) utils/frontier/pop_planner.py picks the shards holding the best
        score; shards tied for it share the batch (each asked for at least one).
        """
        return self.settle_and_pop(Settlement(), spiderid, max_items, throttle, scan_limit)[1]

    # --- settle ----------------------------------------------------------------------------------
    def ack(self, acks: Sequence[Ack]) -> list[str]:
        """Settle leases; returns 'acked' or 'unknown' (already settled or purged) for each."""
        return self.settle(Settlement(acks=list(acks)))["acks"]

    def retry(self, retries: Sequence[Retry]) -> list[str]:
        """Move leases to `<spiderid>:delayed`; 'delayed' or 'unknown' (no longer held) for each."""
        return self.settle(Settlement(retries=list(retries)))["retries"]

    def settle(self, batch: Settlement) -> dict[str, list[str]]:
        """Links, retries, dead letters, then acks, in one pipeline (one round trip)."""
        if not batch:
            return {"requests": [], "retries": [], "acks": []}
        return self._settle_retrying(batch, None)[0]

    def settle_and_pop(
        self, batch: Settlement, spiderid: str, max_items: int, throttle: ThrottlePolicy, scan_limit: int = 500
    ) -> tuple[dict[str, list[str]], Popped]:
        """`settle` and then `pop` in the same round trip: a spider that runs out of leases gets
        its own found links written and new work back without waiting for its next flush."""
        out, popped = self._settle_retrying(batch, PopCall(spiderid, max_items, throttle, scan_limit))
        assert popped is not None
        return out, popped

    def _settle_retrying(self, batch: Settlement, pop: PopCall | None) -> tuple[dict[str, list[str]], Popped | None]:
        try:
            return self._settle(batch, pop)
        except NoScriptError:
            # Redis restarted and lost its scripts. On one Redis every EVALSHA failed together and
            # only the plain writes (dead letters, duplicate counts) went through, so only the
            # scripts are sent again. On a cluster the other masters ran theirs: sent again, links
            # come back `duplicate`, acks and retries `unknown`, and a lost pop's leases go back to
            # their queues through the reaper.
            self.scripts.load(self.client)
            return self._settle(batch, pop, scripts_only=True)

    def _settle(
        self, batch: Settlement, pop: PopCall | None, *, scripts_only: bool = False
    ) -> tuple[dict[str, list[str]], Popped | None]:
        """The batch's calls and plain writes, then the pop, in one pipeline; `scripts_only`: the
        plain writes (dead letters, duplicate counts) went through already (a NOSCRIPT resend)."""
        pipe = self.client.pipeline(transaction=False)
        slots: list[tuple[str, int, list[int]]] = []  # (result name, pipeline index, item positions)
        batch_us = _batch_us(self.shards.count)
        for tag, group, positions in self._tagged(batch.requests, lambda r: self.shards.tag(r.domain)):
            slots.append(("requests", len(pipe), positions))
            args = self._enqueue_argv(tag, group, positions, batch_us)
            evalsha_in(pipe, self.scripts.enqueue, keys.shard_route(tag), args)
        self._register(pipe, batch.requests)
        for tag, retries, positions in self._tagged(batch.retries, lambda r: r.lease.tag):
            slots.append(("retries", len(pipe), positions))
            args = self._flat([self.state_timeout], (r.argv() for r in retries))
            evalsha_in(pipe, self.scripts.retry, keys.shard_route(tag), args)
        for entry in batch.dead if not scripts_only else ():
            dead_letters.store(pipe, entry)
        for crawl, count in batch.duplicates.items() if not scripts_only else ():
            progress = self.shards.tags[0] + keys.crawl_progress(*crawl)  # progress is summed over shards
            pipe.hincrby(progress, "dropped_duplicate", count)
            pipe.expire(progress, self.state_timeout)
        for tag, acks, positions in self._tagged(batch.acks, lambda a: a.tag):
            slots.append(("acks", len(pipe), positions))
            args = self._flat([self.state_timeout], (a.argv() for a in acks))
            evalsha_in(pipe, self.scripts.ack, keys.shard_route(tag), args)
        self._settled_shares(batch)
        pops = self._add_pops(pipe, pop, set()) if pop is not None else []
        self.round_trips += 1
        results = pipe.execute()
        out: dict[str, list[str]] = {
            "requests": [""] * len(batch.requests),
            "retries": [""] * len(batch.retries),
            "acks": [""] * len(batch.acks),
        }
        for name, index, positions in slots:
            for position, status in zip(positions, results[index], strict=True):
                out[name][position] = text(status)
        if pop is None:
            return out, None
        return out, self._gather(pop, {tag: decode_pop(pop.spiderid, tag, results[i]) for tag, i in pops})

    def _settled_shares(self, batch: Settlement) -> None:
        """The leases this batch settles leave the planners' counts of the apps' leases in flight at once
        (the shards' next replies confirm them), so the pops sent with them share the slots freed."""
        if not self.slot_shares or not self.shards.clustered:
            return
        for spiderid, tag, appid in [(a.spiderid, a.tag, a.appid) for a in batch.acks] + [
            (r.lease.spiderid, r.lease.tag, r.lease.record["appid"]) for r in batch.retries
        ]:
            planner = self._planners.get(spiderid)
            if planner is not None:
                planner.settled(tag, appid)

    def _add_pops(self, pipe: Any, pop: PopCall, tried: set[str], first: bool = True) -> list[tuple[str, int]]:
        """Queue the pop calls the planner asks for (shards not tried yet); (tag, pipeline index) each."""
        planner = self._planner(pop.spiderid, read_heads=first)
        planner.policy_seen(pop.throttle.overrides)
        pops = []
        app_limits = self.apps.lease_limits(self.shards.count)
        shares = self.apps.slot_weights() if self.slot_shares else ""
        quotas = planner.quotas(pop.max_items, exclude=tried)
        deals = planner.deals(quotas, self.apps.weight) if shares else {}
        for tag, quota in quotas.items():
            pops.append((tag, len(pipe)))
            args = pop.argv(tag, quota, self.lease_timeout, self.state_timeout, app_limits, shares,
                            deals.get(tag, ""))  # fmt: skip
            evalsha_in(pipe, self.scripts.pop, keys.shard_route(tag), args)
        return pops

    def _gather(self, pop: PopCall, first: dict[str, Popped]) -> Popped:
        """The first round's pops, and more rounds (Redis Cluster) while the batch is short and a
        shard not asked yet holds work: a throttled best domain yields to the next best."""
        planner = self._planner(pop.spiderid, read_heads=False)
        rounds = dict(first)
        planner.learn(rounds)
        while sum(len(p.leases) for p in rounds.values()) < pop.max_items and len(rounds) < self.shards.count:
            remaining = pop.remaining(sum(len(p.leases) for p in rounds.values()))
            pipe = self.client.pipeline(transaction=False)
            calls = self._add_pops(pipe, remaining, set(rounds), first=False)
            if not calls:
                break
            self.round_trips += 1
            results = pipe.execute()
            more = {tag: decode_pop(pop.spiderid, tag, results[i]) for tag, i in calls}
            planner.learn(more)
            rounds.update(more)
        planner.finish(pop.max_items, rounds)
        if not rounds:  # every shard empty or throttled
            return Popped([], planner.wait())
        return _merged(list(rounds.values()))

    def _planner(self, spiderid: str, read_heads: bool = True) -> PopPlanner:
        """The spider's pop planner; on a cluster, with every shard's best ready score and next due
        time read first when it has nothing to ask (at the start, or after a short batch)."""
        planner = self._planners.get(spiderid)
        if planner is None:
            planner = self._planners[spiderid] = PopPlanner(self.shards.tags)
        if read_heads and planner.needs_heads():
            pipe = self.client.pipeline(transaction=False)
            for tag in self.shards.tags:
                sid = tag + spiderid
                pipe.zrange(keys.classes_ready(sid), 0, 0, withscores=True)
                pipe.zrange(keys.classes_snoozed(sid), 0, 0, withscores=True)
                pipe.zrange(keys.delayed(sid), 0, 0, withscores=True)
                pipe.exists(keys.heads(sid))
                if self.slot_shares:
                    pipe.hgetall(keys.app_leases(sid))  # the slot shares' counts (lib/app_limits.lua), fresh
            replies = pipe.execute()
            per_shard = 5 if self.slot_shares else 4
            self.round_trips += 1
            now = time.time()
            best: dict[str, float | None] = {}
            due: dict[str, float] = {}
            held: dict[str, dict[str, int]] = {}
            for i, tag in enumerate(self.shards.tags):
                ready, snoozed, delayed, has_work, *app_leases = replies[per_shard * i : per_shard * (i + 1)]
                if app_leases:
                    held[tag] = {text(app): n for app, v in app_leases[0].items() if (n := int(v)) > 0}
                best[tag] = float(ready[0][1]) if ready else None
                times = [float(s[0][1]) for s in (snoozed, delayed) if s]
                if has_work and not ready and not snoozed:
                    times.append(now)  # work in neither set: the shard's next pop repairs it
                if times:
                    due[tag] = min(times)
            planner.learn_heads(best, due, now, held)
        return planner

    # --- idle wait ---------------------------------------------------------------------------------
    @property
    def can_wait(self) -> bool:
        """One shard: every enqueue of a spider pushes its wake-up token to one key. With several
        (Redis Cluster) the tokens are spread over their slots and one BLPOP cannot watch them all."""
        return self.shards.count == 1

    def wait_for_work(self, spiderid: str, timeout: float) -> bool:
        """Block (in a thread) until the spider's queues gain work (lib/wake.lua) or `timeout` s
        pass; True when woken. Holds one pooled connection meanwhile."""
        self.round_trips += 1
        key = keys.wake(self.shards.tags[0] + spiderid)
        return self.client.blpop([key], timeout=max(0.01, timeout)) is not None

    def wake(self, spiderid: str) -> None:
        """Push a wake-up token at once (a crawler interrupting its own wait: it has writes to make)."""
        self.round_trips += 1
        key = keys.wake(self.shards.tags[0] + spiderid)
        pipe = self.client.pipeline(transaction=False)
        pipe.rpush(key, "1")
        pipe.ltrim(key, 0, 0)
        pipe.expire(key, WAKE_TTL)
        pipe.execute()

    # --- release, extend, throttle ---------------------------------------------------------------
    def release(self, leases: Sequence[Lease]) -> list[str]:
        """Return leases to their queues at once (clean shutdown); the attempt is not counted."""
        if not leases:
            return []
        pipe = self.client.pipeline(transaction=False)
        calls = []
        for tag, group, positions in self._tagged(leases, lambda lease: lease.tag):
            groups = ([*lease.head(), -int(lease.record.get("priority", 1))] for lease in group)
            calls.append(positions)
            evalsha_in(pipe, self.scripts.release, keys.shard_route(tag), self._flat([self.state_timeout], groups))
        return self._placed(len(leases), calls, self._execute(pipe))

    def extend(self, spiderid: str, leases: Sequence[Lease]) -> list[str]:
        """Push the deadlines of held leases to now + LEASE_TIMEOUT; returns the members lost."""
        if not leases:
            return []
        pipe = self.client.pipeline(transaction=False)
        for tag, group, _ in self._tagged(leases, lambda lease: lease.tag):
            args = [tag + spiderid, self.lease_timeout, *(lease.member for lease in group)]
            evalsha_in(pipe, self.scripts.extend, keys.shard_route(tag), args)
        return [text(m) for lost in self._execute(pipe) for m in lost]

    def fetched_late(self, lease: Lease, throttle_key: str, at: float, interval: float) -> bool:
        """A lease fetched at `at`, well after it was handed out: the domain's next moderated slot
        counts from the fetch (utils/frontier/lua/fetched.lua). True when the slot moved."""
        self.round_trips += 1
        key = lease.tag + keys.throttle_states(throttle_key, lease.domain)
        return bool(self.scripts.fetched(keys=[key], args=LateFetch(at, interval, lease.domain).argv()))

    def set_throttle_delay(self, domain: str, throttle_key: str, seconds: float, ttl: int) -> None:
        """Seconds between two hits of a domain's throttle key cluster-wide (robots.txt Crawl-delay)."""
        self.round_trips += 1
        key = self.shards.tag(domain) + keys.throttle_states(throttle_key, domain)
        self.scripts.throttle_delay(keys=[key], args=[seconds, ttl, domain])

    def set_ladder_pace(self, spiderid: str, domain: str, throttle_key: str, level: int, seconds: float,
                        hold: int) -> None:  # fmt: skip
        """A domain's ladder level and the seconds between two of its hits (utils/frontier/lua/ladder_pace.lua),
        for `hold` seconds: pop.lua spaces its hits by them and stamps its leases with the level."""
        self.round_trips += 1
        tag = self.shards.tag(domain)
        names = [tag + keys.ladder_levels(spiderid), tag + keys.throttle_states(throttle_key, domain)]
        self.scripts.ladder_pace(keys=names, args=[level, seconds, hold, domain])

    # --- helpers ---------------------------------------------------------------------------------
    def _execute(self, pipe: Any) -> list[Any]:
        self.round_trips += 1
        try:
            return list(pipe.execute())
        except NoScriptError:
            self.scripts.load(self.client)
            return list(pipe.execute())

    def _enqueue_argv(self, tag: str, requests: Sequence[NewRequest], places: list[int], batch_us: str) -> list[Any]:
        """enqueue.lua's ARGV: the head, each distinct profile once, then one group per request."""
        profiles: dict[str, int] = {}  # profile JSON -> its number in this call (1, 2, ...)
        groups = []
        for request, place in zip(requests, places, strict=True):
            number = profiles.setdefault(request.profile, len(profiles) + 1) if request.profile else 0
            weight = request.own_weight() or self.apps.weight(request.appid)
            groups.append([*request.argv(tag), place, number, weight])
        head = [*self._enqueue_head, batch_us, self.exact_max, self.false_drop, self.window, len(profiles), *profiles]
        return self._flat(head, groups)

    @staticmethod
    def _tagged(items: Sequence[T], tag_of: Callable[[T], str]) -> Iterable[tuple[str, list[T], list[int]]]:
        """Items grouped by shard tag, with their positions in `items` (to put replies back in order)."""
        groups: dict[str, tuple[list[T], list[int]]] = defaultdict(lambda: ([], []))
        for position, item in enumerate(items):
            group, positions = groups[tag_of(item)]
            group.append(item)
            positions.append(position)
        return [(tag, group, positions) for tag, (group, positions) in groups.items()]

    @staticmethod
    def _placed(size: int, positions: list[list[int]], replies: list[Any]) -> list[str]:
        out = [""] * size
        for places, reply in zip(positions, replies, strict=True):
            for place, status in zip(places, reply, strict=True):
                out[place] = text(status)
        return out

    @staticmethod
    def _flat(head: list[Any], groups: Any) -> list[Any]:
        args = list(head)
        for group in groups:
            args.extend(group)
        return args


def _batch_us(shards: int) -> str:
    """The batch time the enqueue script numbers requests by: on a Redis Cluster the caller's clock,
    since one batch's calls run on several masters at once; on one Redis the server's ('')."""
    return str(time.time_ns() // 1000) if shards > 1 else ""


def _merged(pops: list[Popped]) -> Popped:
    """One pop per shard as one: best priority first, the soonest wake-up, every denial."""
    if len(pops) == 1:
        return pops[0]
    leases = [lease for p in pops for lease in p.leases]
    leases.sort(key=lambda lease: (-int(lease.record.get("priority", 1)), lease.request_id))  # FIFO on ties
    waits = [p.retry_after for p in pops if p.retry_after is not None]
    return Popped(leases, min(waits) if waits else None, sum(p.denied for p in pops))
