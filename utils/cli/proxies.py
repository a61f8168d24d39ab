"""`shoal proxies`: the pool's state as the cluster sees it (credentials never shown)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.proxies.pool import GROUP_FIELDS, ProxyPool, group_health


def proxies_command(settings: Settings, args: argparse.Namespace) -> int:
    """Print one line per proxy of PROXY_LIST, then one per group of labels (JSON lines with --json)."""
    pool = ProxyPool.from_settings(settings, redis_client(settings, ping=True, decode=True))
    rows = pool.state()
    if not rows:
        print("no proxy pool (PROXY_LIST is empty)", file=sys.stderr)
        return 0
    as_json = getattr(args, "json", False)
    for row in rows:
        print(json.dumps(row, sort_keys=True) if as_json else _line(row))
    for group in group_health(rows):
        print(json.dumps(group, sort_keys=True) if as_json else _group_line(group))
    return 0


def _group_line(group: dict[str, object]) -> str:
    counters = " ".join(f"{name}={group[name]}" for name in GROUP_FIELDS)
    return (f"group {group['group']}  {group['healthy']}/{group['proxies']} healthy  "
            f"{group['quarantined_domains']} domain quarantine(s)  {counters}")  # fmt: skip


def _line(row: dict[str, object]) -> str:
    until = row["quarantined_until"]
    state = f"quarantined until {_when(until)}" if isinstance(until, float) else "healthy"
    domains = row["quarantined_domains"]
    banned = ", ".join(f"{d} until {_when(t)}" for d, t in domains.items()) if isinstance(domains, dict) else ""
    counters = " ".join(f"{name}={row[name]}" for name in ("requests", "successes", "bans", "retries"))
    line = f"{row['proxy']}  {counters}  {state}"
    line = f"{line}  quarantined for: {banned}" if banned else line
    return f"{line}  group {row['group']}"


def _when(ts: object) -> str:
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[arg-type]
