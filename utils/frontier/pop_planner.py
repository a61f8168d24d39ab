"""Which frontier shards a spider pops from, and how many leases it asks each for (Redis Cluster).

On one Redis there is one shard and a pop asks it for the whole batch. With several shards (one per
hash tag, spread over the masters) priority stays global this way: each shard's best ready score
(the best request among its domains whose throttle allows them) is known, from every shard's sets
when nothing is known and then from the score each pop reports, and the batch goes to the shards
holding the best score, shared between them when they tie. Each pop also says when its shard next
has something due (a snoozed domain, a retry); a due shard is always asked for at least one lease,
so it wakes its domains and no shard starves, and a shard with nothing due is left alone until then.
When the chosen shards cannot fill the batch, the next best are asked for the rest in another
round. A batch that stays short makes the next pop read every shard's sets again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from utils.frontier.types import Popped


class PopPlanner:
    """Per spider: the best ready score of each shard, and when each shard next has something due."""

    def __init__(self, tags: list[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.tags = tags
        self.clock = clock
        self.best: dict[str, float | None] | None = None  # tag -> best ready score; None = unknown
        self.due: dict[str, float] = {}  # tag -> monotonic time a snoozed domain or a retry is due
        self.overrides: object = {}  # the throttle overrides of the last pop

    def policy_seen(self, overrides: object) -> None:
        """A change of the live throttle overrides makes every shard due now: its pop script then
        looks again at the domains whose limits changed (pop.lua apply_override_changes)."""
        if overrides != self.overrides:
            self.overrides = overrides
            now = self.clock()
            self.due = dict.fromkeys(self.tags, now)

    def needs_heads(self) -> bool:
        """Whether every shard's sets must be read before asking (nothing known, or nothing to ask)."""
        return len(self.tags) > 1 and (self.best is None or not self.quotas(1, set()))

    def learn_heads(self, best: dict[str, float | None], due: dict[str, float], now_unix: float) -> None:
        """Every shard's best ready score, and when it next has something due (unix seconds)."""
        now = self.clock()
        self.best = dict(best)
        self.due = {tag: now + (at - now_unix) for tag, at in due.items()}

    def quotas(self, max_items: int, exclude: set[str]) -> dict[str, int]:
        """Leases to ask of each shard not in `exclude` (shards left out are not asked)."""
        if len(self.tags) == 1:
            return {} if exclude else {self.tags[0]: max_items}
        now = self.clock()
        open_ = [t for t in self.tags if t not in exclude]
        quotas = {t: 1 for t in open_ if self.due.get(t, float("inf")) <= now}  # wakes its due domains
        ready = {t: s for t in open_ if (s := (self.best or {}).get(t)) is not None}
        if ready:
            top = min(ready.values())
            tied = [t for t, s in ready.items() if s == top]
            quotas.update(dict.fromkeys(tied, max(1, -(-max_items // len(tied)))))
        return quotas

    def learn(self, popped: dict[str, Popped]) -> None:
        """What one round of pops said: each shard's best ready score left, and when it is next due."""
        if len(self.tags) == 1:
            return
        now = self.clock()
        for tag, shard in popped.items():
            if self.best is not None:
                self.best[tag] = shard.best_left
            if shard.retry_after is None:
                self.due.pop(tag, None)
            else:
                self.due[tag] = now + shard.retry_after

    def finish(self, max_items: int, popped: dict[str, Popped]) -> None:
        """After the last round: a short batch makes the next pop read every shard's sets."""
        if len(self.tags) > 1 and sum(len(p.leases) for p in popped.values()) < max_items:
            self.best = None

    def wait(self) -> float | None:
        """Seconds until a shard next has something due (None: nothing queued or waiting)."""
        now = self.clock()
        waits = [at - now for at in self.due.values()]
        return max(0.0, min(waits)) if waits else None
