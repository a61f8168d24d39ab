"""`shoal proxies`: the pool's state as the cluster sees it (credentials never shown)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.proxies.pool import ProxyPool


def proxies_command(settings: Settings, args: argparse.Namespace) -> int:
    """Print one line per proxy of PROXY_LIST (JSON lines with --json)."""
    pool = ProxyPool.from_settings(settings, redis_client(settings, ping=True, decode=True))
    rows = pool.state()
    if not rows:
        print("no proxy pool (PROXY_LIST is empty)", file=sys.stderr)
        return 0
    for row in rows:
        print(json.dumps(row, sort_keys=True) if getattr(args, "json", False) else _line(row))
    return 0


def _line(row: dict[str, object]) -> str:
    until = row["quarantined_until"]
    state = f"quarantined until {_when(until)}" if isinstance(until, float) else "healthy"
    domains = row["quarantined_domains"]
    banned = ", ".join(f"{d} until {_when(t)}" for d, t in domains.items()) if isinstance(domains, dict) else ""
    counters = " ".join(f"{name}={row[name]}" for name in ("requests", "successes", "bans", "retries"))
    line = f"{row['proxy']}  {counters}  {state}"
    return f"{line}  quarantined for: {banned}" if banned else line


def _when(ts: object) -> str:
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # type: ignore[arg-type]
