"""The apps sharing the cluster as REST and the dashboard show them: figures and quota of each."""

from __future__ import annotations

from typing import Any

from rest.gateway import Gateway
from utils.apps import mirror
from utils.apps.usage import read_figures


def apps_view(gw: Gateway, appids: list[str] | None = None) -> dict[str, Any]:
    """Each app's figures with its quota; an app with a quota but no crawl yet is listed too."""
    quotas = mirror.read(gw.redis, appids)
    figures = read_figures(gw.redis, appids)
    named = set(figures) | (set(quotas.apps) if appids is None else set(appids) & set(quotas.apps))
    apps = []
    for appid in sorted(named):
        entry = figures.get(appid) or {"appid": appid}
        entry["quota"] = quotas.of(appid).as_dict()
        apps.append(entry)
    return {"apps": apps, "default_quota": quotas.default.as_dict()}
