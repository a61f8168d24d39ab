"""The Python side of the frontier's Lua calls that are not a list of typed items: one encoder for
what a script takes and one decoder for what it returns, named after the script's opening contract.

The per-item scripts encode their groups on the items themselves (`NewRequest.argv` for
enqueue.lua, `Ack.argv`, `Retry.argv`, `Lease.head`); pop.lua and fetched.lua are here.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import ujson

from utils.frontier import crawl_request
from utils.frontier.types import SLOT_SLACK, Lease, Popped, ThrottlePolicy

PROMOTE_MAX = 100  # most due retries one pop moves back into their queues (pop.lua ARGV[12])


class PopCall(NamedTuple):
    """What a spider asks of pop.lua: up to `max_items` leases of `spiderid` under `throttle`,
    looking at no more than `scan_limit` domains besides its leases."""

    spiderid: str
    max_items: int
    throttle: ThrottlePolicy
    scan_limit: int = 500

    def argv(self, tag: str, quota: int, lease_timeout: float, state_timeout: int, app_limits: str = "",
             shares: str = "", dealt: str = "") -> list[Any]:  # fmt: skip
        """pop.lua's ARGV for the shard `tag`, asked for `quota` of the leases; `app_limits`: the
        apps' lease-time quotas, `shares`: their weights ('' = slots not shared; utils/frontier/weights.py),
        `dealt`: the leases the caller deals to each app in this call (Redis Cluster; '' = one shard)."""
        return [tag + self.spiderid, quota, lease_timeout, self.scan_limit, *self.throttle.argv(tag), state_timeout,
                PROMOTE_MAX, app_limits, shares, dealt]  # fmt: skip

    def remaining(self, leased: int) -> PopCall:
        """The same call for what is left once `leased` leases came back."""
        return self._replace(max_items=self.max_items - leased)


class PopHeader(NamedTuple):
    """The first values of pop.lua's reply."""

    wait_ms: int  # until the shard may next hand out something (0 = now, -1 = nothing waiting)
    denied: int  # domains the call snoozed on their throttle
    best: str  # the best score among the ready domains ('' = none)
    app_leases: str  # JSON {appid: leases in flight} of the shard, when asked with a deal ('' = not)


class PoppedRow(NamedTuple):
    """One lease in pop.lua's reply."""

    domain: str
    member: str  # the queue member (request id and crawl code)
    payload: bytes | str  # the stored request ('' when its crawl's payload is gone)
    crawl: str  # `<appid>\t<crawlid>` ('' = unknown)
    level: int  # the domain's ladder level when its throttle hit was spent (keys.ladder_levels)
    profile: bytes | str  # the JSON of its crawl-level fields ('' = none)


HEADER_SIZE = len(PopHeader._fields)
ROW_SIZE = len(PoppedRow._fields)


def decode_pop(spiderid: str, tag: str, flat: list[Any]) -> Popped:
    """pop.lua's flat reply (the header, then one row per lease) as the leases of one shard.

    A row whose crawl or payload is gone is dropped: nothing to crawl; the reaper ends its lease."""
    header = PopHeader(int(flat[0]), int(flat[1]), text(flat[2]), text(flat[3]))
    received = time.time()
    leases = []
    for i in range(HEADER_SIZE, len(flat), ROW_SIZE):
        row = PoppedRow(text(flat[i]), text(flat[i + 1]), flat[i + 2], text(flat[i + 3]), int(flat[i + 4]),
                        flat[i + 5])
        if not (row.payload and row.crawl):
            continue
        appid, _, crawlid = row.crawl.partition("\t")
        record = crawl_request.restore(row.payload, row.profile, spiderid, appid, crawlid, row.member)
        leases.append(Lease(spiderid, row.domain, row.member, record, tag, received, row.level))
    wait = None if header.wait_ms < 0 else header.wait_ms / 1000
    app_leases = ujson.loads(header.app_leases) if header.app_leases else None
    return Popped(leases, wait, header.denied, float(header.best) if header.best else None, app_leases)


class LateFetch(NamedTuple):
    """What fetched.lua takes: a lease of `domain` fetched at `at` (unix s), its interval (s)."""

    at: float
    interval: float
    domain: str

    def argv(self) -> list[Any]:
        return [self.at, self.interval, SLOT_SLACK, self.domain]


def text(value: bytes | str) -> str:
    """A reply value as text (clients that decode replies and clients that do not)."""
    return value.decode() if isinstance(value, bytes) else value
