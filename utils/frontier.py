"""The crawl frontier in Redis: enqueue through the filters, leased pops under the throttle, acks.

Each operation is one Lua call (utils/lua), so a batch of requests costs one round trip whatever
its size; `Frontier.flush` sends found links and acks of finished pages in one pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ujson

from utils import crawl_request
from utils.clients import RedisClient
from utils.scripts import Scripts
from utils.settings import Settings


@dataclass(frozen=True)
class NewRequest:
    """A request to queue: where it goes, the filters it passes, and its stored JSON."""

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

    def argv(self) -> list[Any]:
        return [
            self.spiderid,
            self.domain,
            self.priority,
            self.appid,
            self.crawlid,
            self.fingerprint or b"",
            self.max_pages,
            "1" if self.seed else "0",
            self.offset_key,
            self.offset,
            self.payload,
        ]


@dataclass(frozen=True)
class Lease:
    """A request handed to a spider; it stays in `<spiderid>:inflight` until acked."""

    spiderid: str
    domain: str
    request_id: str  # the queue member: 16 hex digits
    record: dict[str, Any]


@dataclass(frozen=True)
class Popped:
    """The leases of one pop, and when a throttled domain with work is next allowed (seconds)."""

    leases: list[Lease]
    retry_after: float | None  # None: no queued domain is waiting on its throttle


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


class Frontier:
    """Typed wrappers around the enqueue, pop and ack scripts of one Redis client."""

    def __init__(
        self,
        client: RedisClient,
        dupefilter_timeout: int = 600,
        state_timeout: int = 86400,
        domain_page_timeout: int = 600,
        global_page_limit: int = 0,
        global_page_timeout: int = 600,
        lease_timeout: float = 120.0,
    ) -> None:
        self.client = client
        self.scripts = Scripts(client)
        self.lease_timeout = lease_timeout
        self.state_timeout = state_timeout
        self._enqueue_head = [
            dupefilter_timeout,
            state_timeout,
            domain_page_timeout,
            global_page_limit,
            global_page_timeout,
            0,
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
        )

    def enqueue(self, requests: Sequence[NewRequest]) -> list[str]:
        """Queue requests; returns one status each (queued, duplicate, page_limit, blacklist, replayed)."""
        if not requests:
            return []
        return [_text(s) for s in self.scripts.enqueue(args=self._enqueue_argv(requests))]

    def enqueue_in(self, pipe: Any, requests: Sequence[NewRequest]) -> None:
        """Add the enqueue call to a pipeline; its statuses come back from `pipe.execute()`."""
        if requests:
            self.scripts.enqueue(args=self._enqueue_argv(requests), client=pipe)

    def pop(self, spiderid: str, max_items: int, throttle: ThrottlePolicy, scan_limit: int = 500) -> Popped:
        """Lease up to `max_items` requests of `spiderid`, best priority first, under the throttle."""
        args = [spiderid, max_items, self.lease_timeout, scan_limit, *throttle.argv(), self.state_timeout]
        flat = self.scripts.pop(args=args)
        wait_ms = int(flat[0])
        leases = []
        for i in range(1, len(flat), 3):
            domain, request_id, payload = _text(flat[i]), _text(flat[i + 1]), flat[i + 2]
            record = crawl_request.decode(payload) if payload else {}
            leases.append(Lease(spiderid, domain, request_id, record))
        return Popped(leases, None if wait_ms < 0 else wait_ms / 1000)

    def ack(self, acks: Sequence[Ack]) -> list[str]:
        """Settle leases; returns 'acked' or 'unknown' (already settled or purged) for each."""
        if not acks:
            return []
        return [_text(s) for s in self.scripts.ack(args=self._ack_argv(acks))]

    def ack_in(self, pipe: Any, acks: Sequence[Ack]) -> None:
        """Add the ack call to a pipeline."""
        if acks:
            self.scripts.ack(args=self._ack_argv(acks), client=pipe)

    def flush(self, requests: Sequence[NewRequest], acks: Sequence[Ack]) -> tuple[list[str], list[str]]:
        """Found links first, then acks, in one round trip: a crawl never looks finished between them."""
        if not requests or not acks:
            return self.enqueue(requests), self.ack(acks)
        pipe = self.client.pipeline(transaction=False)
        self.enqueue_in(pipe, requests)
        self.ack_in(pipe, acks)
        queued, acked = pipe.execute()
        return [_text(s) for s in queued], [_text(s) for s in acked]

    def _ack_argv(self, acks: Sequence[Ack]) -> list[Any]:
        args: list[Any] = [self.state_timeout]
        for ack in acks:
            args.extend(ack.argv())
        return args

    def _enqueue_argv(self, requests: Sequence[NewRequest]) -> list[Any]:
        args: list[Any] = list(self._enqueue_head)
        for request in requests:
            args.extend(request.argv())
        return args


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
