"""`shoal domain`: a domain's block escalation ladder (issue 33), read and set by hand.

    shoal domain show link shop.example     # level, since, reason, recent detections, history
    shoal domain list link                  # every domain that left level 0, with its level
    shoal domain set link shop.example 2    # e.g. straight to the proxy pool
    shoal domain reset link shop.example    # back to level 0 (the way out of paused)
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.frontier.block_config import LEVEL_NAMES
from utils.frontier.domains import host_domain
from utils.frontier.ladder import Ladder


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["show", "list", "set", "reset"])
    p.add_argument("spider", help="spider name, e.g. link")
    p.add_argument("domain", nargs="?", help="the domain (show, set, reset)")
    p.add_argument("level", nargs="?", type=int, help="0 configured, 1 slower, 2 proxied, 3 rendered, 4 paused")
    p.add_argument("--reason", default="set by hand", help="kept in the domain's history")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def domain_command(settings: Settings, args: argparse.Namespace) -> int:
    ladder = Ladder.from_settings(settings, redis_client(settings, ping=True, decode=True))
    if args.action == "list":
        for domain, level in sorted(ladder.domains(args.spider).items()):
            print(f"{domain}  {level} {LEVEL_NAMES[level]}")
        return 0
    if not args.domain:
        print(f"shoal domain {args.action}: name the domain", file=sys.stderr)
        return 2
    domain = host_domain(args.domain)
    if args.action in ("set", "reset"):
        level = 0 if args.action == "reset" else args.level
        if level is None:
            print("shoal domain set: name the level (0-4)", file=sys.stderr)
            return 2
        try:
            ladder.set_level(args.spider, domain, level, "hand", args.reason)
        except ValueError as exc:
            print(f"shoal domain set: {exc}", file=sys.stderr)
            return 2
    state = ladder.state(args.spider, domain)
    print(json.dumps(state, sort_keys=True) if args.json else _text(state))
    return 0


def _text(state: dict[str, Any]) -> str:
    since = f" since {_when(state['since'])} ({state['reason']}, by {state['by']})" if state["since"] else ""
    lines = [f"{state['spiderid']} {state['domain']}: level {state['level']} {state['state']}{since}",
             f"detections {state['detections']} (in window {state['recent_detections']}), "
             f"clean pages in a row {state['clean_pages']}"]  # fmt: skip
    lines += [f"  {_when(step['at'])}  {step['from']} -> {step['to']}  {step['reason']} ({step['by']})"
              for step in state["history"]]  # fmt: skip
    return "\n".join(lines)


def _when(ts: float) -> str:
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
