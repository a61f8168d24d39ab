"""The two kinds of redis monitor plugin, and what they share.

A job plugin answers jobs of the stream (`accepts` + `handle`, which returns the answers; the
monitor sends them and acknowledges the job once Kafka confirmed them). A periodic plugin does
its own work in `run_once(max_items) -> int` (expiry, the lease reaper, finished crawls).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from utils.jobs.stream import Job
from utils.schemas.answers import server_time


class JobPlugin(Protocol):
    rank: int

    def accepts(self, job: Job) -> bool:
        """True for the jobs this plugin answers (by kind and action)."""

    def handle(self, job: Job) -> list[dict[str, Any]]:
        """Do the job; return its answers. Raising leaves the job to be retried."""


class PeriodicPlugin(Protocol):
    rank: int

    def run_once(self, max_items: int) -> int:
        """Do what is due; the number of items handled (0 = idle)."""


class Every:
    """A period for a periodic plugin: `due()` once per `interval` s, or at once after a full batch."""

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        self.interval = interval
        self.clock = clock
        self.next_at = 0.0

    def due(self) -> bool:
        now = self.clock()
        if now < self.next_at:
            return False
        # On a grid of the interval, so work of one period falls due together and an idle monitor
        # wakes once for all of it (RedisMonitor.idle_wait), not once per plugin.
        self.next_at = (now // self.interval + 1) * self.interval if self.interval > 0 else now
        return True

    def again_now(self) -> None:
        """More work is waiting: run on the next loop instead of after the interval."""
        self.next_at = 0.0


def action_answer(job: Job, **fields: Any) -> dict[str, Any]:
    """The common keys of an action answer (reference §3.2), crawlid only when the request had one."""
    request = job.request
    answer: dict[str, Any] = {
        "action": request["action"],
        "appid": job.appid,
        "spiderid": request["spiderid"],
        "uuid": job.uuid,
        "server_time": server_time(),
    }
    if request.get("crawlid"):
        answer["crawlid"] = request["crawlid"]
    answer.update(fields)
    return answer


def is_action(job: Job, *actions: str) -> bool:
    return job.kind == "action" and job.request.get("action") in actions
