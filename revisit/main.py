"""`shoal revisit`: run the revisit loop (or --burst: feed what is due, then exit); `shoal revisit
status|pause|resume|drop APPID CRAWLID` shows or changes one crawl's revisits."""

from __future__ import annotations

import argparse
import json
import logging

import psycopg

from revisit.loop import Revisit
from utils.cli.main import stop_event_on_signals
from utils.config.postgres import postgres_conninfo
from utils.config.settings import Settings
from utils.freshness import metrics, state
from utils.node.startup import wait_for_services
from utils.observability.metrics import start_metrics_server

log = logging.getLogger(__name__)


def main(settings: Settings, args: argparse.Namespace) -> int:
    action = getattr(args, "action", "run") or "run"
    if action != "run":
        return control(settings, action, args.appid, args.crawlid)
    stop = stop_event_on_signals()
    wait_for_services(settings, ("kafka",), stop)
    revisit = Revisit.from_settings(settings)
    if getattr(args, "burst", False):
        while not stop.is_set() and revisit.run_once():
            pass
        revisit.close()
        return 0
    start_metrics_server(settings, "revisit")  # here, not in the CLI: status/pause/... print JSON only
    metrics.register(revisit.summaries)
    revisit.run(stop)
    return 0


def control(settings: Settings, action: str, appid: str | None, crawlid: str | None) -> int:
    """Print one crawl's figures (every crawl's without ids) or pause/resume/drop its revisits."""
    schema = settings.get_str("SINK_DB_SCHEMA")
    with psycopg.connect(postgres_conninfo(settings), autocommit=True) as connection:
        if action == "status" and not (appid and crawlid):
            found = [state.summary(connection, schema, a, c) for a, c in state.crawls(connection, schema)]
            print(json.dumps(found, indent=2))
            return 0
        if not (appid and crawlid):
            print(f"shoal revisit {action}: give APPID and CRAWLID")
            return 2
        if action == "pause":
            state.pause(connection, schema, appid, crawlid)
        elif action == "resume":
            state.resume(connection, schema, appid, crawlid)
        elif action == "drop":
            print(json.dumps({"dropped": state.drop(connection, schema, appid, crawlid)}))
            return 0
        print(json.dumps(state.summary(connection, schema, appid, crawlid), indent=2))
    return 0
