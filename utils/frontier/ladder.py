"""A domain's block escalation ladder (issue 33), held in Redis next to its queue: one state per
spider and domain, shared by every crawler process, changed only by `ladder_step.lua`.

Levels: 0 as configured, 1 slower (the domain's throttle holds LADDER_SLOW_DELAY between hits),
2 through the proxy pool, 3 on render nodes, 4 paused (each request dead-lettered). A domain steps
up one rung after `up_after` detections within `window` seconds, down one after `down_after` clean
pages in a row; paused only leaves by hand (`shoal domain reset`). Every step is kept in the
domain's history (LADDER_HISTORY steps).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from importlib import resources
from typing import Any

from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.block_config import LEVEL_NAMES, LadderRules, level_of, rules_from
from utils.frontier.scripts import source
from utils.frontier.shards import Shards

_SCRIPT = resources.files("utils.frontier").joinpath("ladder_step.lua").read_text()


@dataclass(frozen=True)
class Step:
    """The level after an event and before it."""

    level: int
    before: int

    @property
    def changed(self) -> bool:
        return self.level != self.before


def rules_from_settings(settings: Settings) -> LadderRules:
    """LADDER_LEVELS, LADDER_UP_AFTER, LADDER_WINDOW, LADDER_DOWN_AFTER; ValueError when out of range."""
    entry = {"levels": [int(level) for level in settings.get_list("LADDER_LEVELS")],
             "up_after": settings.get_int("LADDER_UP_AFTER"), "window": settings.get_float("LADDER_WINDOW"),
             "down_after": settings.get_int("LADDER_DOWN_AFTER")}  # fmt: skip
    return rules_from(entry, LadderRules(), "LADDER_*")


class Ladder:
    def __init__(self, client: Any, history: int, ttl: int, shards: Shards | None = None) -> None:
        self.client = client
        self.history, self.ttl = history, ttl
        self.shards = shards or Shards.for_client(client)
        self._step = client.register_script(_SCRIPT)
        self._pace = client.register_script(source("ladder_pace"))

    @classmethod
    def from_settings(cls, settings: Settings, client: Any) -> Ladder:
        return cls(client, settings.get_int("LADDER_HISTORY"), settings.get_int("LADDER_STATE_TTL"),
                   Shards.from_settings(settings))  # fmt: skip

    def detect(self, spiderid: str, domain: str, reason: str, by: str, rules: LadderRules) -> Step:
        """Count one block detection; steps up when the window holds `up_after` of them."""
        return self._call("detect", spiderid, domain, reason, by, rules, 0)

    def clean(self, spiderid: str, domain: str, pages: int, by: str, rules: LadderRules) -> Step:
        """Count `pages` clean pages in a row; steps down after `down_after`."""
        return self._call("clean", spiderid, domain, "clean pages", by, rules, pages)

    def set_level(self, spiderid: str, domain: str, level: int, by: str = "hand", reason: str = "set by hand") -> Step:
        """Put the domain at `level` (0 resets it); kept in its history like any step, and where the
        pops stamp it on the domain's next leases (its pace follows when a crawler reads the level)."""
        step = self._call("set", spiderid, domain, reason, by, LadderRules(), level_of(level, "level"))
        names = [self.shards.tag(domain) + keys.ladder_levels(spiderid)]
        self._pace(keys=names, args=[step.level, 0, self.ttl, domain])
        return step

    def levels(self, spiderid: str, domains: list[str]) -> dict[str, int]:
        """Each domain's level (0 when it has no state), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for domain in domains:
            pipe.hget(keys.ladder(spiderid, domain), "level")
        return {d: int(v or 0) for d, v in zip(domains, pipe.execute(), strict=True)}

    def state(self, spiderid: str, domain: str) -> dict[str, Any]:
        """What REST and `shoal domain show` print: level, its name, since, reason, counters, history."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(keys.ladder(spiderid, domain))
        pipe.lrange(keys.ladder_history(spiderid, domain), 0, -1)
        pipe.zcard(keys.ladder_detections(spiderid, domain))
        raw, history, recent = pipe.execute()
        fields = {_text(k): _text(v) for k, v in raw.items()}
        level = int(fields.get("level", 0))
        return {
            "spiderid": spiderid, "domain": domain, "level": level, "state": LEVEL_NAMES[level],
            "since": float(fields["since"]) if "since" in fields else None, "reason": fields.get("reason"),
            "by": fields.get("by"), "clean_pages": int(fields.get("clean", 0)),
            "detections": int(fields.get("detections", 0)), "recent_detections": int(recent),
            "history": [json.loads(_text(step)) for step in history],
        }  # fmt: skip

    def domains(self, spiderid: str) -> dict[str, int]:
        """Every domain of the spider that left level 0 at some time -> its level now."""
        return {_text(d): int(level) for d, level in self.client.zrange(keys.ladder_domains(spiderid), 0, -1,
                                                                          withscores=True)}  # fmt: skip

    def _call(self, event: str, spiderid: str, domain: str, reason: str, by: str, rules: LadderRules,
              value: int) -> Step:  # fmt: skip
        names = [keys.ladder(spiderid, domain), keys.ladder_detections(spiderid, domain),
                 keys.ladder_history(spiderid, domain), keys.ladder_domains(spiderid)]  # fmt: skip
        args = [event, repr(time.time()), domain, reason, by, ",".join(map(str, rules.levels)), rules.up_after,
                rules.window, rules.down_after, self.history, value, self.ttl]  # fmt: skip
        level, before = self._step(keys=names, args=args)
        return Step(int(level), int(before))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
