"""Which frontier shards a spider pops from, and how many leases it asks each for (Redis Cluster).

On one Redis there is one shard and a pop asks it for the whole batch. With several shards (one per
hash tag, spread over the masters) priority stays global this way: each shard's best queued score
is known (`ZRANGE <shard>:heads 0 0` when nothing is known, then the score every pop reports), and
the batch goes to the shards holding the best score, shared between them when they tie. When they
cannot fill it (throttled domains, too little work), the next best shards are asked for the rest in
another round. A shard whose throttle held everything back is left alone until it allows again, so
a throttled high-priority domain never starves the others. A batch that stays short makes the next
pop look at every shard's head again, since new work may have arrived anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from utils.frontier.types import Popped


class PopPlanner:
    """Per spider: the best score each shard holds, and until when a throttled shard is skipped."""

    def __init__(self, tags: list[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.tags = tags
        self.clock = clock
        self.best: dict[str, float | None] | None = None  # tag -> best head score; None = unknown
        self.blocked: dict[str, float] = {}  # tag -> monotonic time its throttle allows again
        self.retries: dict[str, float] = {}  # tag -> monotonic time its first delayed retry is due

    def needs_heads(self) -> bool:
        """Whether every shard's head must be read before asking (nothing known, or nothing to ask)."""
        return len(self.tags) > 1 and (self.best is None or not self.quotas(1, set()))

    def learn_heads(self, best: dict[str, float | None], retries: dict[str, float], now_unix: float) -> None:
        """Every shard's best head score, and when its first retry is due (unix seconds)."""
        now = self.clock()
        self.best = dict(best)
        self.retries = {tag: now + (at - now_unix) for tag, at in retries.items()}

    def quotas(self, max_items: int, exclude: set[str]) -> dict[str, int]:
        """Leases to ask of each shard not in `exclude` (shards left out are not asked)."""
        if len(self.tags) == 1:
            return {} if exclude else {self.tags[0]: max_items}
        now = self.clock()
        open_ = [t for t in self.tags if t not in exclude and self.blocked.get(t, 0) <= now]
        quotas = {t: 1 for t in open_ if self.retries.get(t, float("inf")) <= now}  # promotes due retries
        ready = {t: s for t in open_ if (s := (self.best or {}).get(t)) is not None}
        if ready:
            top = min(ready.values())
            tied = [t for t, s in ready.items() if s == top]
            quotas.update(dict.fromkeys(tied, max(1, -(-max_items // len(tied)))))
        return quotas

    def learn(self, popped: dict[str, Popped]) -> None:
        """What one round of pops said: each shard's best score left, and its throttle."""
        if len(self.tags) == 1:
            return
        now = self.clock()
        for tag, shard in popped.items():
            if self.best is not None:
                self.best[tag] = shard.best_left
            self.retries.pop(tag, None)
            if not shard.leases and shard.denied and shard.retry_after is not None:
                self.blocked[tag] = now + shard.retry_after
            else:
                self.blocked.pop(tag, None)

    def finish(self, max_items: int, popped: dict[str, Popped]) -> None:
        """After the last round: a short batch makes the next pop read every shard's head."""
        if len(self.tags) > 1 and sum(len(p.leases) for p in popped.values()) < max_items:
            self.best = None

    def wait(self) -> float | None:
        """Seconds until a throttled shard may hand out again or a retry is due (None: nothing waits)."""
        now = self.clock()
        waits = [at - now for at in (*self.blocked.values(), *self.retries.values()) if at > now]
        return min(waits) if waits else None
