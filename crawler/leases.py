"""The leases one spider process holds, and what it still owes Redis about them.

Everything a page changes in the frontier (its links, its ack, a retry or a dead letter) is
buffered here and written in one pipeline per flush. A flush that fails (Redis restarting) keeps
its work for the next one; the scripts are idempotent, so a flush repeated after a lost reply
queues nothing twice. Held leases are extended while their downloads run and given back at once
when the process shuts down cleanly.
"""

from __future__ import annotations

import logging
from typing import Any

from crawler.dupes import Key, RecentFingerprints
from utils.frontier import Ack, Frontier, Lease, NewRequest, Popped, Retry, Settlement

log = logging.getLogger(__name__)


# Statuses after which Redis' dupefilter holds a request's fingerprint.
FINGERPRINTED = frozenset({"queued", "duplicate", "page_limit"})


class LeaseBook:
    def __init__(self, frontier: Frontier, recent: RecentFingerprints) -> None:
        self.frontier = frontier
        self.recent = recent
        self.spiderid = ""
        self.held: dict[str, Lease] = {}  # member -> lease, from pop until settled
        self.pending = Settlement()
        self.releases: list[Lease] = []
        self.settled: dict[str, int] = {}  # outcome -> count, for the close log

    def hold(self, leases: list[Lease]) -> None:
        for lease in leases:
            self.held[lease.member] = lease

    def add_request(self, entry: NewRequest) -> None:
        self.pending.requests.append(entry)

    def count_duplicate(self, key: Key) -> None:
        """A found link dropped here as a known duplicate; counted in Redis by the next flush."""
        crawl = key[:3]
        self.pending.duplicates[crawl] = self.pending.duplicates.get(crawl, 0) + 1

    def settle(self, lease: Lease, outcome: str, details: dict[str, Any] | None = None, pause_key: str = "") -> None:
        """Record the end of a lease; written by the next flush."""
        self.held.pop(lease.member, None)
        self.settled[outcome] = self.settled.get(outcome, 0) + 1
        details = details or {}
        if outcome == "release":
            self.releases.append(lease)
        elif outcome == "retry":
            pause = float(details.get("pause", 0.0))
            self.pending.retries.append(
                Retry(lease, details["record"], float(details["delay"]), pause_key if pause else "", pause)
            )
        else:
            if "dead_letter" in details:
                self.pending.dead.append(details["dead_letter"])
            self.pending.acks.append(Ack.of(lease, outcome))

    def flush(self) -> None:
        """Write what is buffered; on failure it stays buffered (before anything added since)."""
        batch, self.pending = self.pending, Settlement()
        try:
            if batch:
                self._learn(batch, self.frontier.settle(batch))
        except Exception:
            self.pending = _merge(batch, self.pending)
            raise
        releases, self.releases = self.releases, []
        try:
            self.frontier.release(releases)
        except Exception:
            self.releases = releases + self.releases
            raise

    def take(self) -> Settlement:
        """What is buffered, for a write made elsewhere (the scheduler's pop thread); see `popped`."""
        batch, self.pending = self.pending, Settlement()
        return batch

    def popped(self, batch: Settlement, out: dict[str, list[str]], popped: Popped) -> None:
        """A taken batch was written and new work leased in one round trip: the leases are held."""
        self._learn(batch, out)
        self.hold(popped.leases)

    def put_back(self, batch: Settlement) -> None:
        """A taken batch could not be written: it goes first in the next write."""
        self.pending = _merge(batch, self.pending)

    def _learn(self, batch: Settlement, out: dict[str, list[str]]) -> None:
        for entry, status in zip(batch.requests, out["requests"], strict=False):
            if entry.fingerprint and status in FINGERPRINTED:
                self.recent.add((entry.spiderid, entry.appid, entry.crawlid, entry.fingerprint))

    def extend(self) -> None:
        """Push the deadlines of every held lease; a lease the reaper took is forgotten."""
        lost = self.frontier.extend(self.spiderid, list(self.held.values()))
        for member in lost:
            if self.held.pop(member, None) is not None:
                log.warning("Lease lost to the reaper", extra={"member": member, "spiderid": self.spiderid})

    def release(self, leases: list[Lease]) -> int:
        """Give back these leases at once (the process is stopping); the others stay held."""
        for lease in leases:
            self.held.pop(lease.member, None)
        return self.frontier.release(leases).count("released") if leases else 0

    def release_all(self, extra: list[Lease]) -> int:
        """Give back every lease not settled yet (clean shutdown); returns how many."""
        leases = {lease.member: lease for lease in [*self.held.values(), *extra]}
        self.held.clear()
        released = self.frontier.release(list(leases.values()))
        return released.count("released")


def _merge(first: Settlement, then: Settlement) -> Settlement:
    return Settlement(
        requests=first.requests + then.requests,
        retries=first.retries + then.retries,
        dead=first.dead + then.dead,
        acks=first.acks + then.acks,
        duplicates={k: first.duplicates.get(k, 0) + then.duplicates.get(k, 0)
                    for k in first.duplicates.keys() | then.duplicates.keys()},
    )  # fmt: skip
