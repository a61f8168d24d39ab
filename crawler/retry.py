"""What becomes of a request that failed: try again later through Redis, dead-letter it, or drop it.

Scrapy's own RetryMiddleware retries in process memory, so a spider that dies loses the retry and
the cluster's throttle never sees it. Here a retryable failure settles the lease as a retry: the
request waits in `<spiderid>:delayed` for an exponential back-off (RETRY_BACKOFF_BASE doubled per
attempt, at most RETRY_BACKOFF_MAX, at least the server's Retry-After), with its priority lowered,
and any spider may take it afterwards. After RETRY_TIMES retries it is dead-lettered. A block
(`Blocked`) is retried on the ladder's own budget instead, counted in the request's `blocks`.
"""

from __future__ import annotations

import email.utils
import logging
import time
from dataclasses import dataclass
from typing import Any

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.utils.misc import load_object
from scrapy.utils.response import response_status_message
from twisted.python.failure import Failure

from utils.config.settings import Settings
from utils.frontier.block_config import LEVEL_NAMES
from utils.observability.metrics import record_retry

log = logging.getLogger(__name__)

PAUSING_STATUSES = (429, 503)  # their Retry-After holds the whole domain back, cluster-wide


class RetryableStatus(IgnoreRequest):
    """A response whose status is in RETRY_HTTP_CODES: handled as a failure, not as a page."""

    def __init__(self, response: Response, message: str = "") -> None:
        super().__init__(message or response_status_message(response.status))
        self.response = response


class Blocked(RetryableStatus):
    """A response the block detector called a block (crawler/ladder.py), fetched at ladder `level`.

    Retried on its own budget, `blocks` tries (the ladder's: enough for its domain to climb every
    rung), not on RETRY_TIMES: a site that blocks every try of a request would otherwise spend its
    transient-error retries before its domain reached the rung that gets through."""

    def __init__(self, response: Response, reason: str, level: int, budget: int) -> None:
        name = LEVEL_NAMES[level] if 0 <= level < len(LEVEL_NAMES) else "unknown"
        status = response_status_message(response.status)
        super().__init__(response, f"ladder level {level} ({name}), {reason}, {status}")
        self.reason, self.level, self.budget = reason, level, budget


@dataclass(frozen=True)
class Decision:
    """outcome: retry | dead | failed | dropped_robots | dropped_address."""

    outcome: str
    error: str = ""
    status: int | None = None
    delay: float = 0.0  # seconds before a retry may run
    pause: float = 0.0  # seconds the domain's throttle is held back (Retry-After of 429/503)


class RetryPolicy:
    def __init__(
        self,
        times: int,
        base: float,
        cap: float,
        pause_max: float,
        priority_adjust: int,
        exceptions: tuple[type[BaseException], ...],
    ) -> None:
        self.times, self.base, self.cap, self.pause_max = times, base, cap, pause_max
        self.priority_adjust = priority_adjust
        self.exceptions = exceptions

    @classmethod
    def from_settings(cls, settings: Settings, exception_paths: list[str]) -> RetryPolicy:
        return cls(
            times=settings.get_int("RETRY_TIMES"),
            base=settings.get_float("RETRY_BACKOFF_BASE"),
            cap=settings.get_float("RETRY_BACKOFF_MAX"),
            pause_max=settings.get_float("THROTTLE_PAUSE_MAX"),
            priority_adjust=settings.get_int("RETRY_PRIORITY_ADJUST"),
            exceptions=tuple(load_object(path) for path in exception_paths),
        )

    def decide(self, failure: Failure, attempt: int, blocks: int = 0) -> Decision:
        """The fate of a request on its `attempt`-th try (0 = first) that ended in `failure`, after
        `blocks` earlier tries that were blocks (a block is retried while `blocks` is under its budget)."""
        error = failure.value
        if isinstance(error, RetryableStatus):
            spent, budget = (blocks, error.budget) if isinstance(error, Blocked) else (attempt, self.times)
            status: int | None = error.response.status
            retry_after = _retry_after(error.response) if status in PAUSING_STATUSES else None
        elif isinstance(error, self.exceptions):
            spent, budget = attempt, self.times
            status, retry_after = None, None
        elif getattr(error, "dead_at_once", False):  # crawler.ladder.DomainPaused: a paused domain (issue 33)
            return Decision("dead", _describe(failure))
        elif isinstance(error, IgnoreRequest):
            return _ignored(error, failure)
        else:
            return Decision("failed", _describe(failure))
        message = _describe(failure)
        if spent >= budget:
            return Decision("dead", message, status)
        pause = min(retry_after or 0.0, self.pause_max)
        delay = max(min(self.base * 2**attempt, self.cap), pause)
        _report_retry(failure, str(status) if status else type(error).__name__, attempt, delay)
        return Decision("retry", message, status, delay, pause)

    def next_record(self, record: dict[str, Any], blocked: bool = False) -> dict[str, Any]:
        """The stored request of the next try: one more attempt (or block), lower priority."""
        priority = int(record.get("priority", 1)) + self.priority_adjust
        spent = "blocks" if blocked else "attempt"
        return {**record, spent: int(record.get(spent, 0)) + 1, "priority": priority}


# IgnoreRequest messages of Scrapy's middlewares that mean "this page cannot be had": the client gets a
# `success: false` page message (a decompression bomb, a redirect loop), not a silent drop.
_FAILED_IGNORES = ("DOWNLOAD_MAXSIZE", "max redirections")


def _ignored(error: IgnoreRequest, failure: Failure) -> Decision:
    """A request a middleware refused: by the address policy, too large or looping, or robots.txt."""
    reason = getattr(error, "reason", None)
    if reason:  # crawler.guards.AddressRefused (not imported: guards imports the metrics this module uses)
        return Decision("dropped_address", _describe(failure))
    if any(text in str(error) for text in _FAILED_IGNORES):
        return Decision("failed", _describe(failure))
    return Decision("dropped_robots")


def _report_retry(failure: Failure, reason: str, attempt: int, delay: float) -> None:
    """Scrapy Cluster's "Scraper Retry" event and the retries metric (a retry is rare: no hot path)."""
    request = getattr(failure, "request", None)  # set by Scrapy on every download failure
    meta = request.meta if request is not None else {}
    spiderid = str(meta.get("spiderid") or "")
    record_retry(spiderid, reason)
    log.info(
        "Scraper Retry",
        extra={"url": getattr(request, "url", None), "spiderid": spiderid, "appid": meta.get("appid"),
               "crawlid": meta.get("crawlid"), "retry_reason": reason, "attempt": attempt + 1, "delay": delay},
    )  # fmt: skip


def _describe(failure: Failure) -> str:
    return f"{type(failure.value).__name__}: {failure.getErrorMessage()}"


def _retry_after(response: Response) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    raw = response.headers.get(b"Retry-After")
    if not raw:
        return None
    text = raw.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)
