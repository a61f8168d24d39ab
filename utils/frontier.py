"""The crawl frontier in Redis: enqueue through the filters, leased pops under the throttle, settling.

Each operation is one Lua call (utils/lua), so a batch of requests costs one round trip whatever
its size; `Frontier.settle` writes a spider's found links, retries, dead letters and acks in one
pipeline. `round_trips` counts every call, for the "≤ 3 round trips per page" target (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ujson
from redis.exceptions import NoScriptError

from utils import crawl_request, dead_letters, keys
from utils.clients import RedisClient
from utils.fingerprint import bloom_size
from utils.scripts import Scripts, evalsha_in
from utils.settings import Settings

DUPEFILTER_MODES = ("exact", "bloom")


@dataclass(frozen=True)
class NewRequest:
    """A request to queue: where it goes, the filters it passes, and its stored JSON.

    `expires`, `dupefilter` and `dont_filter` are read from the payload when left at None (the
    kafka monitor's seeds); `drop` refuses the request with that reason, counted in the same call.
    """

    spiderid: str
    domain: str
    priority: int
    appid: str
    crawlid: str
    payload: str
    fingerprint: bytes | None = None  # None = not dupefiltered (dont_filter)
    max_pages: int = 0  # domain_max_pages of its crawl; 0 = no limit
    seed: bool = False  # seeds are recorded in the dupefilter but never dropped by it
    offset_key: str = ""  # with offset: skip if a kafka monitor already wrote this message
    offset: int = -1
    expires: int | None = None  # unix seconds; 0 = never
    dupefilter: str | None = None  # exact | bloom | '' (the setting)
    drop: str = ""  # a reason to refuse it (e.g. 'blacklist' for a ZooKeeper-blacklisted domain)

    def argv(self) -> list[Any]:
        expires, mode, fp = self.expires, self.dupefilter, self.fingerprint
        if expires is None or mode is None:
            payload_expires, payload_mode, dont_filter = _payload_options(self.payload)
            expires = payload_expires if expires is None else expires
            mode = payload_mode if mode is None else mode
            fp = None if dont_filter else fp
        return [
            self.spiderid,
            self.domain,
            self.priority,
            self.appid,
            self.crawlid,
            fp or b"",
            self.max_pages,
            "1" if self.seed else "0",
            self.offset_key,
            self.offset,
            self.payload,
            expires,
            mode,
            self.drop,
        ]


def _payload_options(payload: str) -> tuple[int, str, bool]:
    """(expires, dupefilter mode, dont_filter) of a stored request; cheap when they are absent."""
    if '"expires"' not in payload and '"dupefilter"' not in payload and '"dont_filter"' not in payload:
        return 0, "", False
    record = crawl_request.decode(payload)
    return int(record.get("expires") or 0), str(record.get("dupefilter") or ""), bool(record.get("dont_filter"))


@dataclass(frozen=True)
class Lease:
    """A request handed to a spider; it stays in `<spiderid>:inflight` until settled."""

    spiderid: str
    domain: str
    request_id: str  # the queue member: 16 hex digits of request id, then its crawl's code
    record: dict[str, Any]

    @property
    def member(self) -> str:
        """Its member in `<spiderid>:inflight` and `<spiderid>:delayed`."""
        return f"{self.domain}\t{self.request_id}"

    def head(self) -> list[str]:
        return [self.spiderid, self.domain, self.request_id, self.record["appid"], self.record["crawlid"]]


@dataclass(frozen=True)
class Popped:
    """The leases of one pop, and when a throttled domain or a retry is next ready (seconds)."""

    leases: list[Lease]
    retry_after: float | None  # None: nothing is waiting on a throttle or a retry time
    denied: int = 0  # domains with work that their throttle held back during this pop


@dataclass(frozen=True)
class Ack:
    """The end of a lease: counted under `outcome` in the crawl's progress."""

    spiderid: str
    domain: str
    request_id: str
    appid: str
    crawlid: str
    outcome: str = "crawled"

    @classmethod
    def of(cls, lease: Lease, outcome: str = "crawled") -> Ack:
        rec = lease.record
        return cls(lease.spiderid, lease.domain, lease.request_id, rec["appid"], rec["crawlid"], outcome)

    def argv(self) -> list[str]:
        return [self.spiderid, self.domain, self.request_id, self.appid, self.crawlid, self.outcome]


@dataclass(frozen=True)
class Retry:
    """A leased request to try again after `delay` seconds, stored as `record` (attempt counted)."""

    lease: Lease
    record: dict[str, Any]
    delay: float
    pause_key: str = ""  # throttle key held back cluster-wide (Retry-After), '' = none
    pause: float = 0.0  # seconds

    def argv(self) -> list[Any]:
        payload = crawl_request.encode(self.record)
        return [*self.lease.head(), self.delay, payload, self.pause_key, self.pause]


@dataclass
class Settlement:
    """What a spider hands back in one flush: found links, retries, dead letters, acks."""

    requests: list[NewRequest] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)  # utils.dead_letters records
    acks: list[Ack] = field(default_factory=list)
    # (spiderid, appid, crawlid) -> found links a spider dropped itself as known duplicates
    duplicates: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.requests or self.retries or self.dead or self.acks or self.duplicates)


@dataclass
class ThrottlePolicy:
    """What the pop script needs to know of the throttle (reference §7), per spider process."""

    key_prefix: str = ""  # '', '<spider>:', '<ip>:' or '<spider>:<ip>:'
    hits: int = 10
    window: float = 60.0
    moderated: bool = True
    overrides: dict[str, tuple[int, float]] = field(default_factory=dict)  # domain -> (hits, window)
    blacklist: frozenset[str] = frozenset()

    def argv(self) -> list[Any]:
        overrides = {d: [h, w] for d, (h, w) in self.overrides.items()}
        return [
            self.key_prefix,
            self.hits,
            self.window,
            "1" if self.moderated else "0",
            ujson.dumps(overrides) if overrides else "{}",
            ujson.dumps(sorted(self.blacklist)) if self.blacklist else "[]",
        ]

    def key(self, domain: str) -> str:
        """The throttle key of a domain under this policy."""
        return self.key_prefix + domain


class Frontier:
    """Typed wrappers around the frontier scripts of one Redis client."""

    def __init__(
        self,
        client: RedisClient,
        dupefilter_timeout: int = 600,
        state_timeout: int = 86400,
        domain_page_timeout: int = 600,
        global_page_limit: int = 0,
        global_page_timeout: int = 600,
        lease_timeout: float = 120.0,
        dupefilter_mode: str = "exact",
        bloom: tuple[int, int] = (14_377_619, 10),
    ) -> None:
        if dupefilter_mode not in DUPEFILTER_MODES:
            raise ValueError(f"dupefilter mode {dupefilter_mode!r} is not one of {DUPEFILTER_MODES}")
        self.client = client
        self.scripts = Scripts(client)
        self.lease_timeout = lease_timeout
        self.state_timeout = state_timeout
        self.round_trips = 0
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
        )

    def enqueue(self, requests: Sequence[NewRequest]) -> list[str]:
        """Queue requests; one status each (queued, duplicate, page_limit, blacklist, expired, replayed)."""
        if not requests:
            return []
        self.round_trips += 1
        return [_text(s) for s in self.scripts.enqueue(args=self._enqueue_argv(requests))]

    def enqueue_in(self, pipe: Any, requests: Sequence[NewRequest]) -> None:
        """Add the enqueue call to a pipeline; its statuses come back from `pipe.execute()`."""
        if requests:
            self.scripts.enqueue(args=self._enqueue_argv(requests), client=pipe)

    def pop(self, spiderid: str, max_items: int, throttle: ThrottlePolicy, scan_limit: int = 500) -> Popped:
        """Lease up to `max_items` requests of `spiderid`, best priority first, under the throttle."""
        self.round_trips += 1
        return _popped(spiderid, self.scripts.pop(args=self._pop_args(spiderid, max_items, throttle, scan_limit)))

    def _pop_args(self, spiderid: str, max_items: int, throttle: ThrottlePolicy, scan_limit: int) -> list[Any]:
        return [spiderid, max_items, self.lease_timeout, scan_limit, *throttle.argv(), self.state_timeout, 100]

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
        out, popped = self._settle_retrying(batch, (spiderid, max_items, throttle, scan_limit))
        assert popped is not None
        return out, popped

    def _settle_retrying(
        self, batch: Settlement, pop: tuple[str, int, ThrottlePolicy, int] | None
    ) -> tuple[dict[str, list[str]], Popped | None]:
        try:
            return self._settle(batch, True, pop)
        except NoScriptError:
            # Redis restarted and lost its scripts; every EVALSHA failed together, the plain
            # writes (dead letters, duplicate counts) went through, so only the scripts are sent again.
            self.scripts.load(self.client)
            return self._settle(batch, False, pop)

    def _settle(
        self, batch: Settlement, with_dead: bool, pop: tuple[str, int, ThrottlePolicy, int] | None
    ) -> tuple[dict[str, list[str]], Popped | None]:
        pipe = self.client.pipeline(transaction=False)
        slots: list[tuple[str, int]] = []  # result name -> its index in the pipeline
        if batch.requests:
            slots.append(("requests", len(pipe)))
            evalsha_in(pipe, self.scripts.enqueue, self._enqueue_argv(batch.requests))
        if batch.retries:
            slots.append(("retries", len(pipe)))
            evalsha_in(pipe, self.scripts.retry, self._flat([self.state_timeout], (r.argv() for r in batch.retries)))
        for entry in batch.dead if with_dead else ():
            dead_letters.store(pipe, entry)
        for crawl, count in batch.duplicates.items() if with_dead else ():
            pipe.hincrby(keys.crawl_progress(*crawl), "dropped_duplicate", count)
            pipe.expire(keys.crawl_progress(*crawl), self.state_timeout)
        if batch.acks:
            slots.append(("acks", len(pipe)))
            evalsha_in(pipe, self.scripts.ack, self._flat([self.state_timeout], (a.argv() for a in batch.acks)))
        if pop is not None:
            evalsha_in(pipe, self.scripts.pop, self._pop_args(*pop))
        self.round_trips += 1
        results = pipe.execute()
        out: dict[str, list[str]] = {"requests": [], "retries": [], "acks": []}
        out.update({name: [_text(s) for s in results[index]] for name, index in slots})
        return out, (_popped(pop[0], results[-1]) if pop is not None else None)

    def release(self, leases: Sequence[Lease]) -> list[str]:
        """Return leases to their queues at once (clean shutdown); the attempt is not counted."""
        if not leases:
            return []
        groups = ([*lease.head(), -int(lease.record.get("priority", 1))] for lease in leases)
        self.round_trips += 1
        return [_text(s) for s in self.scripts.release(args=self._flat([self.state_timeout], groups))]

    def extend(self, spiderid: str, leases: Sequence[Lease]) -> list[str]:
        """Push the deadlines of held leases to now + LEASE_TIMEOUT; returns the members lost."""
        if not leases:
            return []
        self.round_trips += 1
        lost = self.scripts.extend(args=[spiderid, self.lease_timeout, *(lease.member for lease in leases)])
        return [_text(m) for m in lost]

    def set_throttle_delay(self, throttle_key: str, seconds: float, ttl: int) -> None:
        """Seconds between two hits of a throttle key cluster-wide (robots.txt Crawl-delay)."""
        self.round_trips += 1
        self.client.set(keys.throttle_delay(throttle_key), seconds, ex=ttl)

    def _enqueue_argv(self, requests: Sequence[NewRequest]) -> list[Any]:
        return self._flat(self._enqueue_head, (r.argv() for r in requests))

    @staticmethod
    def _flat(head: list[Any], groups: Any) -> list[Any]:
        args = list(head)
        for group in groups:
            args.extend(group)
        return args


def _popped(spiderid: str, flat: list[Any]) -> Popped:
    wait_ms, denied = int(flat[0]), int(flat[1])
    leases = []
    for i in range(2, len(flat), 4):
        domain, member, payload, crawl = _text(flat[i]), _text(flat[i + 1]), flat[i + 2], _text(flat[i + 3])
        if not (payload and crawl):
            continue  # a member whose crawl or payload is gone: nothing to crawl; the reaper drops its lease
        appid, _, crawlid = crawl.partition("\t")
        record = crawl_request.restore(payload, spiderid, appid, crawlid, member)
        leases.append(Lease(spiderid, domain, member, record))
    return Popped(leases, None if wait_ms < 0 else wait_ms / 1000, denied)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
