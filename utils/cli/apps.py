"""`shoal apps` and `shoal keys`: the apps sharing the cluster, their quotas and their REST API keys.

shoal apps                                   # each app: crawls, queued, in flight, pages/s, share, quota use
shoal apps quotas                            # the quotas node (YAML)
shoal apps quota news --max-queued 200000    # set an app's quota ("default" = every app without its own)
shoal apps quota news --max-inflight 50 --pages-per-minute 600 --weight 2
shoal apps quota news --remove               # the app falls back to the default
shoal keys create news --scopes feed,info,stop   # prints the key once
shoal keys list
shoal keys revoke <key id>
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from utils.apps import api_keys
from utils.apps.quota_store import read_quotas, update_quotas
from utils.apps.quotas import FIELDS, changed
from utils.apps.usage import read_figures
from utils.apps.watch import quotas_path
from utils.config.clients import redis_client, zookeeper_client
from utils.config.settings import Settings

COLUMNS = ("appid", "running", "queued", "inflight", "pages_per_sec", "share", "first_page_sec", "quota_use")


def add_apps_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", default="list", choices=["list", "quotas", "quota"])
    p.add_argument("app", nargs="?", help="the appid (quota); 'default' for every app without its own")
    p.add_argument("--max-queued", type=int, help="most requests of the app waiting in the frontier")
    p.add_argument("--max-inflight", type=int, help="most requests of the app leased at once")
    p.add_argument("--pages-per-minute", type=int, help="most requests of the app leased per minute")
    p.add_argument("--weight", type=float, help="the app's crawls' fair share where they meet others (0.01 .. 100)")
    p.add_argument("--remove", action="store_true", help="remove the app's quota entry")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def add_keys_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["create", "list", "revoke"])
    p.add_argument("name", nargs="?", help="the appid (create) or the key id (revoke)")
    p.add_argument("--scopes", default="feed,info,stop", help=f"comma-separated, of {','.join(api_keys.SCOPES)}")
    p.add_argument("--note", default="", help="kept with the key (who holds it)")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def apps_command(settings: Settings, args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(settings, args.json)
    client = zookeeper_client(settings)
    client.start(timeout=settings.get_float("ZOOKEEPER_TIMEOUT"))
    try:
        path = quotas_path(settings)
        if args.action == "quotas":
            quotas = read_quotas(client, path)
        elif not args.app:
            print("shoal apps quota: name the app", file=sys.stderr)
            return 2
        elif not args.remove and not _given(args):
            print("shoal apps quota: give --max-queued, --max-inflight, --pages-per-minute, --weight or --remove",
                  file=sys.stderr)  # fmt: skip
            return 2
        else:
            values = _given(args)
            quotas = update_quotas(client, path, lambda q: changed(q, args.app, values, args.remove))
    except ValueError as exc:
        print(f"shoal apps: {exc}", file=sys.stderr)
        return 2
    finally:
        client.stop()
        client.close()
    print(json.dumps(quotas.as_dict(), sort_keys=True) if args.json else quotas.to_yaml().rstrip())
    return 0


def _given(args: argparse.Namespace) -> dict[str, float | int | None]:
    """The quota fields the command line sets."""
    return {name: value for name in FIELDS if (value := getattr(args, name, None)) is not None}


def _list(settings: Settings, as_json: bool) -> int:
    client = redis_client(settings, ping=True, decode=True)
    figures = read_figures(client)
    if as_json:
        print(json.dumps(list(figures.values()), sort_keys=True))
        return 0
    rows = [[_cell(app.get(c)) for c in COLUMNS] for app in figures.values()]
    print(
        _table([list(COLUMNS), *rows])
        if rows
        else "no app has crawls yet (figures refresh every APPS_REFRESH_INTERVAL)"
    )
    return 0


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}={v:.0%}" for k, v in value.items()) or "-"
    if value is None:
        return "-"
    return str(value)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def keys_command(settings: Settings, args: argparse.Namespace) -> int:
    client = redis_client(settings, ping=True, decode=True)
    if args.action == "list":
        found = api_keys.listed(client)
        if args.json:
            print(json.dumps(found, sort_keys=True))
        for entry in [] if args.json else found:
            print(f"{entry['id']}  {entry['app']}  {','.join(entry['scopes'] or [])}  {entry['note'] or ''}".rstrip())
        return 0
    if not args.name:
        print(f"shoal keys {args.action}: name the {'app' if args.action == 'create' else 'key id'}", file=sys.stderr)
        return 2
    if args.action == "revoke":
        if not api_keys.revoke(client, args.name):
            print(f"shoal keys revoke: no key {args.name!r}", file=sys.stderr)
            return 1
        print(f"revoked {args.name}")
        return 0
    try:
        key_id, key = api_keys.create(client, args.name, args.scopes.split(","), args.note)
    except ValueError as exc:
        print(f"shoal keys create: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"id": key_id, "app": args.name, "key": key}) if args.json else
          f"key {key_id} for app {args.name} (shown once, keep it now):\n{key}")  # fmt: skip
    return 0
