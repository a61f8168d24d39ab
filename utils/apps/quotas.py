"""Per-app quotas: a YAML node in ZooKeeper beside the domain config, parsed and validated.

    default: {max_queued: 1000000}
    apps:
      price-monitor: {max_queued: 200000, max_inflight: 50, pages_per_minute: 600, weight: 2}
      research: {}                      # no quota, whatever the default says

An app's own entry replaces the default entry whole. `max_queued` bounds the requests of an app
waiting in the frontier (queued or waiting to retry, seeds and found links alike), checked where
requests enter; `max_inflight` (requests leased at once) and `pages_per_minute` are checked where
requests are leased (a crawl over them waits, utils/frontier/lua/lib/app_limits.lua). `weight` is
no limit: the app's crawls' share where they meet other crawls (utils/frontier/weights.py); an app
without one has the default entry's, else the setting CRAWL_WEIGHT. A field Shoal
does not know refuses the whole node (the watcher keeps the last good one): a misspelt quota that
is silently ignored is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from utils.frontier.weights import WEIGHT_MAX, WEIGHT_MIN

QUOTA_NAMES = ("max_queued", "max_inflight", "pages_per_minute")
FIELDS = (*QUOTA_NAMES, "weight")
LIMIT = 10**12  # the largest quota value accepted


@dataclass(frozen=True)
class AppQuota:
    """One app's limits (None = unlimited) and weight (None = the default's)."""

    max_queued: int | None = None
    max_inflight: int | None = None
    pages_per_minute: int | None = None
    weight: float | None = None

    @property
    def limited(self) -> bool:
        return any(getattr(self, name) is not None for name in QUOTA_NAMES)

    def as_dict(self) -> dict[str, Any]:
        return {name: value for name in FIELDS if (value := getattr(self, name)) is not None}


@dataclass(frozen=True)
class Quotas:
    """Every app's quota: its own entry, else the default entry."""

    apps: dict[str, AppQuota] = field(default_factory=dict)
    default: AppQuota = AppQuota()

    def of(self, appid: str) -> AppQuota:
        return self.apps.get(appid, self.default)

    @property
    def empty(self) -> bool:
        return not self.default.limited and not any(q.limited for q in self.apps.values())

    def weight_of(self, appid: str) -> float | None:
        """The app's weight: its own entry's, else the default entry's (None: the setting's)."""
        own = self.apps.get(appid)
        return own.weight if own is not None and own.weight is not None else self.default.weight

    @classmethod
    def parse(cls, text: str | bytes | None) -> Quotas:
        """An empty or missing node is no quota at all; anything malformed raises ValueError."""
        if not text:
            return cls()
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"quotas are not YAML: {exc}") from exc
        if not isinstance(data, dict) or set(data) - {"default", "apps"}:
            raise ValueError("quotas must be a mapping with `default` and `apps`")
        apps = data.get("apps") or {}
        if not isinstance(apps, dict):
            raise ValueError("quotas: apps must be a mapping of appid -> quota")
        return cls({str(app): parse_entry(str(app), entry) for app, entry in apps.items()},
                   parse_entry("default", data.get("default")))  # fmt: skip

    def to_yaml(self) -> str:
        data: dict[str, Any] = {"apps": {app: q.as_dict() for app, q in sorted(self.apps.items())}}
        if self.default.as_dict():
            data["default"] = self.default.as_dict()
        return yaml.safe_dump(data, default_flow_style=False, sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        return {"default": self.default.as_dict(), "apps": {a: q.as_dict() for a, q in sorted(self.apps.items())}}


def parse_entry(name: str, entry: Any) -> AppQuota:
    if entry is None:
        return AppQuota()
    if not isinstance(entry, dict):
        raise ValueError(f"quotas: {name} must be a mapping of quota -> number, not {entry!r}")
    unknown = set(entry) - set(FIELDS)
    if unknown:
        raise ValueError(f"quotas: {name} has unknown quota(s) {sorted(map(str, unknown))}; known: {FIELDS}")
    values: dict[str, Any] = {}
    for quota, value in entry.items():
        if value is None:
            continue
        if quota == "weight":
            if isinstance(value, bool) or not isinstance(value, int | float) or not WEIGHT_MIN <= value <= WEIGHT_MAX:
                raise ValueError(f"quotas: {name}.weight must be a number in [{WEIGHT_MIN}, {WEIGHT_MAX}]: {value!r}")
            values[quota] = float(value)
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LIMIT:
            raise ValueError(f"quotas: {name}.{quota} must be a whole number in [0, {LIMIT}], not {value!r}")
        values[quota] = value
    return AppQuota(**values)


def changed(quotas: Quotas, appid: str, values: dict[str, float | int | None], remove: bool = False) -> Quotas:
    """`quotas` with one app's entry set (None values unset) or removed; `appid` "default" names the default."""
    if appid == "default":
        base = {} if remove else {**quotas.default.as_dict(), **values}
        return Quotas(dict(quotas.apps), parse_entry("default", base))
    apps = dict(quotas.apps)
    if remove:
        apps.pop(appid, None)
    else:
        apps[appid] = parse_entry(appid, {**(apps[appid].as_dict() if appid in apps else {}), **values})
    return Quotas(apps, quotas.default)
