"""A domain's `blocks` entry in the ZooKeeper config (issue 33): block markers and its escalation ladder.

    domains:
      shop.example:
        blocks: {markers: ["g-recaptcha", "Attention Required"], levels: [0, 1, 2, 4],
                 up_after: 3, window: 60, down_after: 20, level: 2}

`markers` are RE2 patterns searched in a page's body; `levels` the ladder rungs this domain may
use (0 always, in order); `up_after` detections within `window` seconds step it up, `down_after`
clean pages in a row step it down; `level` pins the domain by hand while it is in the config.
Anything RE2 refuses, a level that does not exist or a negative threshold refuses the whole config
(ValueError): the ZooKeeper watcher keeps the last good one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from utils.config.safe_regex import InvalidRegex, check_regexes

LEVELS = (0, 1, 2, 3, 4)  # as configured, slower, through proxies, on render nodes, paused
LEVEL_NAMES = ("configured", "slower", "proxied", "rendered", "paused")
KNOWN = frozenset({"markers", "levels", "up_after", "window", "down_after", "level"})


@dataclass(frozen=True)
class LadderRules:
    """When a domain steps up or down, and over which rungs."""

    levels: tuple[int, ...] = LEVELS
    up_after: int = 3  # detections
    window: float = 60.0  # seconds the detections are counted over
    down_after: int = 20  # clean pages in a row

    def up(self, level: int) -> int:
        """The next rung above `level` (itself at the top)."""
        return next((rung for rung in self.levels if rung > level), level)

    def down(self, level: int) -> int:
        """The next rung below `level` (0 at the bottom)."""
        return max((rung for rung in self.levels if rung < level), default=0)


@dataclass(frozen=True)
class DomainBlocks:
    markers: tuple[str, ...] = ()
    rules: LadderRules | None = None  # None: the LADDER_* settings
    pinned: int | None = None  # a level set by hand in ZooKeeper
    set_fields: frozenset[str] = frozenset()  # the fields of `rules` the entry sets

    def rules_over(self, base: LadderRules) -> LadderRules:
        """The domain's ladder: the fields its entry sets, every other from `base` (LADDER_* settings)."""
        if self.rules is None:
            return base
        return replace(base, **{name: getattr(self.rules, name) for name in self.set_fields})


def parse_blocks(domain: str, entry: Any) -> DomainBlocks:
    """One domain's `blocks` mapping, validated; raises ValueError naming the domain and the field."""
    if not isinstance(entry, dict):
        raise ValueError(f"domain config: {domain}.blocks must be a mapping, not {entry!r}")
    unknown = sorted(set(map(str, entry)) - KNOWN)
    if unknown:
        raise ValueError(f"domain config: {domain}.blocks has unknown fields {unknown}")
    markers = entry.get("markers") or []
    if isinstance(markers, str):
        markers = [markers]
    if not isinstance(markers, list) or not all(isinstance(m, str) for m in markers):
        raise ValueError(f"domain config: {domain}.blocks.markers must be a list of regexes")
    try:
        check_regexes(markers)
    except InvalidRegex as exc:
        raise ValueError(f"domain config: {domain}.blocks.markers: {exc}") from None
    rules = None
    if set(entry) & {"levels", "up_after", "window", "down_after"}:
        rules = rules_from(entry, LadderRules(), f"{domain}.blocks")
    pinned = entry.get("level")
    if pinned is not None:
        pinned = level_of(pinned, f"{domain}.blocks.level")
    fields = frozenset(map(str, entry)) & {"levels", "up_after", "window", "down_after"}
    return DomainBlocks(tuple(markers), rules, pinned, fields)


def rules_from(entry: dict[str, Any], base: LadderRules, where: str) -> LadderRules:
    """`base` with the fields `entry` sets; raises ValueError on a bad level or threshold."""
    levels = entry.get("levels", base.levels)
    if not isinstance(levels, list | tuple) or not levels:
        raise ValueError(f"domain config: {where}.levels must be a list of levels, not {levels!r}")
    rungs = tuple(sorted({level_of(level, f"{where}.levels") for level in levels} | {0}))
    return LadderRules(
        rungs,
        int(_threshold(entry.get("up_after", base.up_after), f"{where}.up_after", 1)),
        _threshold(entry.get("window", base.window), f"{where}.window", 1e-3),
        int(_threshold(entry.get("down_after", base.down_after), f"{where}.down_after", 1)),
    )


def level_of(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in LEVELS:
        raise ValueError(f"domain config: {where}: {value!r} is not a level (0-4: {', '.join(LEVEL_NAMES)})")
    return value


def _threshold(value: Any, where: str, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"domain config: {where} is not a number: {value!r}")
    if not math.isfinite(value) or value < low:
        raise ValueError(f"domain config: {where} must be a finite number >= {low}, not {value!r}")
    return float(value)
