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

The crawler slots are shared between apps by weight over the whole cluster (lib/app_limits.lua): each
pop hands back its shard's leases in flight per app, and the planner deals the next round's leases
out to the apps and the shards asked (`deals`), since a shard's script sees only its own slot.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from collections.abc import Callable, Container

import ujson

from utils.frontier.types import Popped


class PopPlanner:
    """Per spider: the best ready score of each shard, and when each shard next has something due."""

    def __init__(self, tags: list[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.tags = tags
        self.clock = clock
        self.best: dict[str, float | None] | None = None  # tag -> best ready score; None = unknown
        self.due: dict[str, float] = {}  # tag -> monotonic time a snoozed domain or a retry is due
        self.overrides: object = {}  # the throttle overrides of the last pop
        self.app_leases: dict[str, dict[str, int]] = {}  # tag -> the apps with work there: leases in flight
        self._dealt: dict[str, Counter[str]] = {}  # tag -> the leases per app dealt to the shard's last pop
        self._turn = 0  # the shard first dealt a lease of the next round (deals)

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

    def learn_heads(self, best: dict[str, float | None], due: dict[str, float], now_unix: float,
                    app_leases: dict[str, dict[str, int]] | None = None) -> None:  # fmt: skip
        """Every shard's best ready score, when it next has something due (unix seconds), and its
        leases in flight per app."""
        now = self.clock()
        self.best = dict(best)
        for tag, held in (app_leases or {}).items():
            self.app_leases[tag] = {**dict.fromkeys(self.app_leases.get(tag, {}), 0), **held}
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
            if shard.app_leases is not None:
                self._learn_apps(tag, shard)
            if self.best is not None:
                self.best[tag] = shard.best_left
            if shard.retry_after is None:
                self.due.pop(tag, None)
            else:
                self.due[tag] = now + shard.retry_after

    def _learn_apps(self, tag: str, shard: Popped) -> None:
        """A shard's counts as its pop reported them. An app it reported neither leased nor skipped
        stays known there with none in flight, unless the pop was dealt a lease of it and had no due
        domain of it: then it is dealt there again once the shard reports it."""
        assert shard.app_leases is not None
        leased = Counter(lease.record["appid"] for lease in shard.leases)
        dealt = self._dealt.pop(tag, Counter())
        kept = {app: 0 for app in self.app_leases.get(tag, {}) if dealt[app] <= leased[app]}
        self.app_leases[tag] = {**kept, **shard.app_leases}

    def settled(self, tag: str, appid: str) -> None:
        """A lease of `appid` from shard `tag` was settled (acked, retried) by this process."""
        counts = self.app_leases.get(tag)
        if counts and counts.get(appid, 0) > 0:
            counts[appid] -= 1

    def deals(self, quotas: dict[str, int], weight: Callable[[str], float]) -> dict[str, str]:
        """pop.lua's JSON, per shard asked, of each app's leases dealt there and its rank ('' = one shard).

        The shards of one round decide at once: told only the counts, each would hand its leases to
        the same app, the one furthest below its share, and overshoot it many times over. So the
        round's leases are dealt out here, one at a time to the shards in turn, each to the app with
        the fewest leases per weight (counting those dealt) among the apps the shard has work of: its
        leases in flight, or due domains it skipped in its last call (they come first in its line,
        so an app waiting there is seen). The rank is the order in which the apps would be dealt
        more, for a shard without due domains of the apps dealt to it.
        """
        if len(self.tags) == 1 or not quotas:
            return dict.fromkeys(quotas, "")
        counts: Counter[str] = Counter()
        for held in self.app_leases.values():
            counts.update(held)
        if not counts:
            return dict.fromkeys(quotas, "{}")
        weights = {app: weight(app) for app in counts}
        line = [((n + 1) / weights[app], app) for app, n in counts.items()]  # the next app to deal first
        heapq.heapify(line)
        tags = list(quotas)
        self._turn = (self._turn + 1) % len(tags)
        dealt: dict[str, Counter[str]] = {tag: Counter() for tag in tags}
        order = [
            (quotas[tag], self.app_leases.get(tag) or counts, dealt[tag])
            for tag in tags[self._turn :] + tags[: self._turn]
        ]
        for i in range(max(quotas.values())):  # one lease to each shard in turn
            for quota, among, got in order:
                if i < quota:
                    app = self._next_app(line, among)
                    counts[app] += 1
                    heapq.heappush(line, ((counts[app] + 1) / weights[app], app))
                    got[app] += 1
        self._dealt = dealt
        rank = {app: i for i, (_, app) in enumerate(sorted(line))}
        return {tag: ujson.dumps({app: [dealt[tag][app], rank[app]] for app in rank}) for tag in tags}

    @staticmethod
    def _next_app(line: list[tuple[float, str]], among: Container[str]) -> str:
        """Take the first app of `line` that is `among` out of it (the ones before it stay)."""
        passed = []
        while True:
            entry = heapq.heappop(line)
            if entry[1] in among:
                break
            passed.append(entry)
        for other in passed:
            heapq.heappush(line, other)
        return entry[1]

    def finish(self, max_items: int, popped: dict[str, Popped]) -> None:
        """After the last round: a short batch makes the next pop read every shard's sets."""
        if len(self.tags) > 1 and sum(len(p.leases) for p in popped.values()) < max_items:
            self.best = None

    def wait(self) -> float | None:
        """Seconds until a shard next has something due (None: nothing queued or waiting)."""
        now = self.clock()
        waits = [at - now for at in self.due.values()]
        return max(0.0, min(waits)) if waits else None
