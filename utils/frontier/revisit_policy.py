"""A crawl's revisit policy (issue 31): which pages come back, how often, and how the interval adapts.

Resolved in layers: the REVISIT_* settings < the domain's `revisit` in the ZooKeeper config < the
crawl request's `revisit` < a user spider's `revisit_policy(response, policy)`. The adaptive rule is
Nutch's AdaptiveFetchSchedule in its simplest form: unchanged x inc, changed x dec, within [min, max];
the sink applies it in SQL (sink/store.py), `next_interval` here is the same rule for tests and benches.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

from utils.config.settings import Settings

FIELDS = ("interval", "min", "max", "inc", "dec", "error_interval", "gone_interval")
GONE_STATUSES = (404, 410)


@dataclass(frozen=True)
class RevisitPolicy:
    """Seconds and factors; `gone_interval` 0 = a 404/410 page is never revisited; `pages` None = every page."""

    interval: float = 86400.0
    min: float = 3600.0
    max: float = 2592000.0
    inc: float = 1.2
    dec: float = 0.5
    error_interval: float = 3600.0
    gone_interval: float = 0.0
    pages: str | None = None
    priority: int | None = None
    follow: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> RevisitPolicy:
        def get(name: str) -> float:
            return settings.get_float(f"REVISIT_{name.upper()}")

        return cls(get("interval"), get("min"), get("max"), get("inc"), get("dec"), get("error_interval"),
                   get("gone_interval"))  # fmt: skip

    def merged(self, overrides: dict[str, Any] | None) -> RevisitPolicy:
        """This policy with the values `overrides` sets (unknown keys ignored); bounds kept consistent."""
        if not overrides:
            return self
        known = {k: v for k, v in overrides.items() if k in RevisitPolicy.__dataclass_fields__ and v is not None}
        policy = replace(self, **known)
        low, high = policy.min, policy.max
        if low > high:  # the layer's own bound wins: `max: 600` over a default min of 3600 lowers min
            low, high = (high, high) if "max" in known else (low, low)
        return replace(policy, min=low, max=high, interval=min(max(policy.interval, low), high))

    def covers(self, url: str) -> bool:
        """Whether `url` is one of the pages revisited (all, or those the `pages` regex finds)."""
        return self.pages is None or _compiled(self.pages).search(url) is not None

    def as_message(self) -> dict[str, Any]:
        """The policy as the page message carries it to the sink."""
        return asdict(self)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def check_pages_regex(revisit: dict[str, Any] | None) -> None:
    """Raise ValueError when the policy's `pages` is not a regex (the kafka monitor refuses the request)."""
    pattern = (revisit or {}).get("pages")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"revisit.pages is not a regex: {exc}") from None


def next_interval(policy: RevisitPolicy, interval: float, outcome: str) -> float | None:
    """The interval after a revisit whose `outcome` is not_modified/unchanged/changed/error/gone; None = never."""
    if outcome in ("not_modified", "unchanged"):
        return min(interval * policy.inc, policy.max)
    if outcome == "changed":
        return max(interval * policy.dec, policy.min)
    if outcome == "gone":
        return policy.gone_interval or None
    return interval  # an error keeps the interval; the next try comes after error_interval


def outcome_of(status: int | None, not_modified: bool, changed: bool) -> str:
    """How a fetch counts for the schedule (the sink's SQL says the same)."""
    if not_modified or status == 304:
        return "not_modified"
    if status in GONE_STATUSES:
        return "gone"
    if status is None or status >= 400:
        return "error"
    return "changed" if changed else "unchanged"
