"""The values the frontier's scripts exchange with their callers: requests, leases, acks, retries.

Kept apart from utils/frontier/operations.py (which sends them) so that the script protocol reads in one place.
Every `argv` puts the shard's hash tag in front of the spiderid (and of throttle keys): the scripts
build each key from those, so on a Redis Cluster all keys of a call share the shard's slot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ujson

from utils.frontier import crawl_request


@dataclass(frozen=True)
class NewRequest:
    """A request to queue: where it goes, the filters it passes, and its stored form
    (`crawl_request.encode`: the per-request payload and the crawl-level `profile` JSON).

    `expires`, `dupefilter` and `dont_filter` are read from the stored form when left at None;
    `drop` refuses the request with that reason, counted in the same call.
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
    offset_key: str = ""  # with offset and mark: skip if a kafka monitor already wrote this message
    offset: int = -1
    mark: str = ""  # the message's fingerprint (kafka_monitor/batch.py): the same offset of another log differs
    expires: int | None = None  # unix seconds; 0 = never
    dupefilter: str | None = None  # exact | bloom | '' (the setting)
    drop: str = ""  # a reason to refuse it (e.g. 'blacklist' for a ZooKeeper-blacklisted domain)
    profile: str = ""  # JSON of its crawl-level fields, stored once per crawl ('' = none)
    weight: float = 0.0  # its crawl's fair-queuing weight; 0 = its profile's `weight`, else its app's

    def own_weight(self) -> float:
        """The weight the request itself sets (this field, else its crawl's `weight` field); 0 = none."""
        if self.weight > 0 or '"weight"' not in self.profile:
            return self.weight
        value = ujson.loads(self.profile).get("weight")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0.0

    def argv(self, tag: str = "") -> list[Any]:
        """The enqueue script's values; `tag` is the shard of the domain (prefixed to the spiderid)."""
        expires, mode, fp = self.expires, self.dupefilter, self.fingerprint
        if expires is None or mode is None:
            payload_expires, payload_mode, dont_filter = _payload_options(self.payload, self.profile)
            expires = payload_expires if expires is None else expires
            mode = payload_mode if mode is None else mode
            fp = None if dont_filter else fp
        return [
            tag + self.spiderid,
            self.domain,
            self.priority,
            self.appid,
            self.crawlid,
            fp or b"",
            self.max_pages,
            "1" if self.seed else "0",
            tag + self.offset_key if self.offset_key else "",  # one offset marks key per shard
            f"{self.offset}:{self.mark}",
            self.payload,
            expires,
            mode,
            self.drop,
        ]


def _payload_options(payload: str, profile: str) -> tuple[int, str, bool]:
    """(expires, dupefilter mode, dont_filter) of a stored request; cheap when they are absent."""
    text = payload + profile
    if '"expires"' not in text and '"dupefilter"' not in text and '"dont_filter"' not in text:
        return 0, "", False
    record = crawl_request.decode(payload, profile)
    return int(record.get("expires") or 0), str(record.get("dupefilter") or ""), bool(record.get("dont_filter"))


@dataclass(frozen=True)
class Lease:
    """A request handed to a spider; it stays in `<spiderid>:inflight` until settled."""

    spiderid: str
    domain: str
    request_id: str  # the queue member: fair-queuing tag and request id, then its crawl's code (crawl_request)
    record: dict[str, Any]
    tag: str = ""  # its frontier shard's hash tag ('' on one Redis; utils/frontier/shards.py)
    received: float = 0.0  # unix time the spider got it: a fetch much later moves its throttle slot
    level: int | None = None  # its domain's ladder level at the lease (pop.lua); None: not leased by a pop

    @property
    def member(self) -> str:
        """Its member in `<spiderid>:inflight` and `<spiderid>:delayed`."""
        return f"{self.domain}\t{self.request_id}"

    def head(self) -> list[str]:
        """spiderid (with the shard's tag: the scripts build every key from it), domain, member, crawl."""
        return [self.tag + self.spiderid, self.domain, self.request_id, self.record["appid"], self.record["crawlid"]]


@dataclass(frozen=True)
class Popped:
    """The leases of one pop, and when a throttled domain or a retry is next ready (seconds)."""

    leases: list[Lease]
    retry_after: float | None  # None: nothing is waiting on a throttle or a retry time
    denied: int = 0  # domains with work that their throttle held back during this pop
    best_left: float | None = None  # the shard's best queue score after the pop (None: nothing queued)
    app_leases: dict[str, int] | None = None  # the shard's leases in flight per app (Redis Cluster, slot shares)


@dataclass(frozen=True)
class Ack:
    """The end of a lease: counted under `outcome` in the crawl's progress."""

    spiderid: str
    domain: str
    request_id: str
    appid: str
    crawlid: str
    outcome: str = "crawled"
    tag: str = ""

    @classmethod
    def of(cls, lease: Lease, outcome: str = "crawled") -> Ack:
        rec = lease.record
        return cls(lease.spiderid, lease.domain, lease.request_id, rec["appid"], rec["crawlid"], outcome, lease.tag)

    def argv(self) -> list[str]:
        return [self.tag + self.spiderid, self.domain, self.request_id, self.appid, self.crawlid, self.outcome]


@dataclass(frozen=True)
class Retry:
    """A leased request to try again after `delay` seconds, stored as `record` (attempt counted)."""

    lease: Lease
    record: dict[str, Any]
    delay: float
    pause_key: str = ""  # throttle key held back cluster-wide (Retry-After), '' = none
    pause: float = 0.0  # seconds

    def argv(self) -> list[Any]:
        stored = crawl_request.encode(self.record)
        pause_key = self.lease.tag + self.pause_key if self.pause_key else ""
        return [*self.lease.head(), self.delay, stored.payload, pause_key, self.pause, stored.profile]


@dataclass
class Settlement:
    """What a spider hands back in one flush: found links, retries, dead letters, acks."""

    requests: list[NewRequest] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)
    dead: list[dict[str, Any]] = field(default_factory=list)  # utils.frontier.dead_letters records
    acks: list[Ack] = field(default_factory=list)
    # (spiderid, appid, crawlid) -> found links a spider dropped itself as known duplicates
    duplicates: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.requests or self.retries or self.dead or self.acks or self.duplicates)


# A moderated slot never lags more than this share of an interval behind now: two hits of a domain
# are never closer than (1 - SLOT_SLACK) intervals (pop.lua spends hits by it through the generated
# lib `constants`; fetched.lua moves a slot to a late fetch minus it).
SLOT_SLACK = 0.05
# A fetch this share of an interval or more after its lease is reported to fetched.lua: below
# SLOT_SLACK, so every fetch late enough to move the slot is reported, and the punctual ones cost
# no round trip.
LATE_FETCH_SHARE = 0.02


@dataclass
class ThrottlePolicy:
    """What the pop script needs to know of the throttle (reference §7), per spider process."""

    key_prefix: str = ""  # '', '<spider>:', '<ip>:' or '<spider>:<ip>:'
    hits: int = 10
    window: float = 60.0
    moderated: bool = True
    overrides: dict[str, tuple[int, float]] = field(default_factory=dict)  # domain -> (hits, window)
    blacklist: frozenset[str] = frozenset()

    def argv(self, tag: str = "") -> list[Any]:
        overrides = {d: [h, w] for d, (h, w) in self.overrides.items()}
        return [
            tag + self.key_prefix,
            self.hits,
            self.window,
            "1" if self.moderated else "0",
            ujson.dumps(overrides) if overrides else "{}",
            ujson.dumps(sorted(self.blacklist)) if self.blacklist else "[]",
        ]

    def key(self, domain: str) -> str:
        """The throttle key of a domain under this policy."""
        return self.key_prefix + domain
