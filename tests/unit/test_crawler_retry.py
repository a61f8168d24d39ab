"""What becomes of a failed try: retry with back-off and Retry-After, dead letter, or drop."""

from __future__ import annotations

import email.utils
import time

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from twisted.internet.error import ConnectionRefusedError
from twisted.python.failure import Failure

from crawler.retry import Blocked, RetryableStatus, RetryPolicy

POLICY = RetryPolicy(times=3, base=1.0, cap=5.0, pause_max=60.0, priority_adjust=-10,
                     exceptions=(ConnectionRefusedError,))  # fmt: skip


def failure_of(error: Exception) -> Failure:
    try:
        raise error
    except type(error):
        return Failure()


def status_failure(status: int, retry_after: str | None = None) -> Failure:
    headers = {"Retry-After": retry_after} if retry_after else {}
    response = Response("http://a.com/", status=status, headers=headers, request=Request("http://a.com/"))
    return failure_of(RetryableStatus(response))


@pytest.mark.parametrize(("attempt", "delay"), [(0, 1.0), (1, 2.0), (2, 4.0)])
def test_retries_back_off_exponentially_up_to_the_cap(attempt: int, delay: float) -> None:
    decision = POLICY.decide(failure_of(ConnectionRefusedError()), attempt)
    assert (decision.outcome, decision.delay, decision.pause) == ("retry", delay, 0.0)
    assert "ConnectionRefusedError" in decision.error


def test_after_retry_times_the_request_is_dead_with_its_status() -> None:
    decision = POLICY.decide(status_failure(500), 3)
    assert (decision.outcome, decision.status) == ("dead", 500)
    assert "500 Internal Server Error" in decision.error


def test_retry_after_of_429_and_503_holds_the_domain_back() -> None:
    decision = POLICY.decide(status_failure(429, "30"), 0)
    assert (decision.outcome, decision.delay, decision.pause) == ("retry", 30.0, 30.0)
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    dated = POLICY.decide(status_failure(503, when), 1)
    assert 18 <= dated.pause <= 20.5
    assert POLICY.decide(status_failure(500, "30"), 0).pause == 0.0  # only 429 and 503 pause
    assert POLICY.decide(status_failure(429, "99999"), 0).pause == 60.0  # capped


def test_robots_refusals_are_dropped_and_other_errors_fail_at_once() -> None:
    assert POLICY.decide(failure_of(IgnoreRequest("Forbidden by robots.txt")), 0).outcome == "dropped_robots"
    failed = POLICY.decide(failure_of(ValueError("Unsupported URL scheme")), 0)
    assert (failed.outcome, failed.error) == ("failed", "ValueError: Unsupported URL scheme")


def test_the_next_try_counts_an_attempt_and_lowers_the_priority() -> None:
    assert POLICY.next_record({"url": "u", "priority": 70, "attempt": 1}) == {"url": "u", "priority": 60, "attempt": 2}


def test_recent_fingerprints_trust_an_entry_for_a_bounded_time_and_size() -> None:
    from crawler.dupes import RecentFingerprints

    now = [0.0]
    recent = RecentFingerprints(max_age=300, max_entries=2, clock=lambda: now[0])
    recent.add(("link", "app", "c1", b"a" * 8))
    assert ("link", "app", "c1", b"a" * 8) in recent
    assert ("link", "app", "c2", b"a" * 8) not in recent  # per crawl
    now[0] = 301.0
    assert ("link", "app", "c1", b"a" * 8) not in recent  # Redis may have expired it since
    for name in (b"b", b"c", b"d"):
        recent.add(("link", "app", "c1", name * 8))
    assert len(recent) == 2


def test_address_refusals_are_dropped_with_their_reason_and_bombs_and_loops_fail() -> None:
    from crawler.guards import AddressRefused

    refused = POLICY.decide(failure_of(AddressRefused("address", "http://169.254.169.254/")), 0)
    assert refused.outcome == "dropped_address"
    assert "169.254.169.254" in refused.error
    bomb = IgnoreRequest("Ignored response <200 http://a/> because its body exceeded DOWNLOAD_MAXSIZE (10 B)")
    assert POLICY.decide(failure_of(bomb), 0).outcome == "failed"
    assert POLICY.decide(failure_of(IgnoreRequest("max redirections reached")), 0).outcome == "failed"


def test_a_block_spends_its_own_budget_not_retry_times() -> None:
    response = Response("http://a.com/", status=200, request=Request("http://a.com/"))
    block = failure_of(Blocked(response, "marker", 1, budget=12))
    assert POLICY.decide(status_failure(503), attempt=3).outcome == "dead"  # RETRY_TIMES (3) spent
    assert POLICY.decide(block, attempt=3, blocks=11).outcome == "retry"  # blocks do not count there
    dead = POLICY.decide(block, attempt=0, blocks=12)
    assert (dead.outcome, dead.error) == ("dead", "Blocked: ladder level 1 (slower), marker, 200 OK")
    record = POLICY.next_record({"url": "http://a.com/", "priority": 50, "attempt": 1}, blocked=True)
    assert (record["attempt"], record["blocks"], record["priority"]) == (1, 1, 40)
