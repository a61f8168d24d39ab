"""Action requests (info, stop and the dead-letter actions): jobs for the redis monitors."""

from __future__ import annotations

from typing import Any, TypedDict

from kafka_monitor.plugins.jobs import JobHandler
from utils.config.errors import InvalidMessage

NEED_CRAWLID = ("stop", "dead-letters", "replay-dead-letters", "purge-dead-letters")


class ActionRequest(TypedDict, total=False):
    """utils/schemas/action.json (tests check the keys match)."""

    uuid: str
    appid: str
    crawlid: str
    spiderid: str
    action: str


class ActionHandler(JobHandler):
    """Scrapy Cluster's ActionHandler; a stop without crawlid, which it dropped unanswered, is refused."""

    schema = "action"
    kind = "action"
    event = "Added action to Redis"

    def check(self, message: dict[str, Any]) -> None:
        action = message["action"]
        if action in NEED_CRAWLID and "crawlid" not in message:
            text = "Stop requests need a crawlid and appid" if action == "stop" else f"{action} requests need a crawlid"
            raise InvalidMessage(text, cause=f"crawlid: required for the {action} action")
