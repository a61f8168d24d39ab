"""The progress model (utils/frontier/progress.py): counters, pages/s, ETA, and the terminal lines."""

from __future__ import annotations

import io

import pytest

from utils.frontier import progress
from utils.frontier.progress import CrawlRef, RateTracker

REF = CrawlRef("link", "app", "crawl1")


def reading(started: float = 1000.0, **counters: int) -> progress.Progress:
    raw = {b"spiderid": b"link", b"appid": b"app", b"crawlid": b"crawl1", b"started": str(started).encode()}
    raw.update({k.encode(): str(v).encode() for k, v in counters.items()})
    found = progress.parse(REF, raw)
    assert found is not None
    return found


def test_a_missing_hash_is_no_progress() -> None:
    assert progress.parse(REF, {}) is None


def test_counters_pending_settled_and_drops() -> None:
    p = reading(queued=5, inflight=2, retrying=1, enqueued=20, crawled=10, failed=1, dead=1, dropped_duplicate=7)
    assert (p.pending, p.settled, p.pages) == (8, 12, 12)
    assert p.dropped == {"duplicate": 7}
    assert not p.finished


def test_finished_means_nothing_queued_in_flight_or_retrying() -> None:
    assert reading(enqueued=3, crawled=3).finished
    assert not reading(enqueued=3, crawled=2, retrying=1).finished
    assert not reading().finished  # nothing was ever queued: not started, not finished


def test_snapshot_without_samples_uses_the_average_since_start() -> None:
    p = reading(started=1000.0, queued=8, enqueued=20, crawled=12)
    snap = progress.snapshot(p, now=1010.0)
    assert snap["pages_per_sec"] == 1.2
    assert snap["eta_sec"] == pytest.approx(8 / 1.2, abs=0.1)
    assert (snap["percent"], snap["pending"], snap["done"], snap["finished"]) == (60.0, 8, 12, False)
    assert snap["elapsed_sec"] == 10.0


def test_snapshot_uses_the_tracker_window_when_it_has_one() -> None:
    tracker = RateTracker(window=30)
    tracker.add(2000.0, reading(queued=100, enqueued=110, crawled=10))
    later = reading(queued=50, enqueued=110, crawled=60)
    tracker.add(2005.0, later)
    snap = progress.snapshot(later, tracker, now=2005.0)
    assert snap["pages_per_sec"] == 10.0
    assert snap["eta_sec"] == 5.0


def test_a_finished_crawl_has_eta_zero_and_its_duration() -> None:
    p = reading(started=1000.0, enqueued=4, crawled=4, updated=1004)
    snap = progress.snapshot(p, now=5000.0)
    assert (snap["eta_sec"], snap["finished"], snap["elapsed_sec"], snap["pages_per_sec"]) == (0.0, True, 4.0, 1.0)


def test_an_unknown_rate_gives_no_eta() -> None:
    snap = progress.snapshot(reading(started=1000.0, queued=3, enqueued=3), now=1000.5)
    assert snap["eta_sec"] is None


def test_the_tracker_keeps_about_one_window_of_samples() -> None:
    tracker = RateTracker(window=10)
    for t in range(0, 60, 2):
        tracker.add(float(t), reading(enqueued=100, queued=100 - t, crawled=t))
    assert tracker.samples[0][0] >= 58 - 12
    assert tracker.rates() == (1.0, 1.0)


def test_the_tracker_needs_two_samples_a_second_apart() -> None:
    tracker = RateTracker(window=10)
    assert tracker.rates() is None
    tracker.add(1.0, reading(enqueued=1))
    tracker.add(1.5, reading(enqueued=1, crawled=1))
    assert tracker.rates() is None


def test_bar_and_clock() -> None:
    assert progress.bar(50, width=10) == "█████░░░░░"
    assert progress.bar(150, width=4) == "████"
    assert (progress.clock(None), progress.clock(65), progress.clock(3725)) == ("?", "1:05", "1:02:05")


def test_a_line_shows_counters_rate_and_eta() -> None:
    snap = progress.snapshot(reading(started=1000.0, queued=8, inflight=2, enqueued=20, crawled=10, failed=1), now=1010)
    line = progress.format_line(snap)
    assert line.startswith("app/crawl1 [")
    for part in ("50.0%", "10/20", "crawled 10", "queued 8", "inflight 2", "failed 1", "1.1 pages/s", "ETA 0:10"):
        assert part in line, (part, line)
    done = progress.format_line(progress.snapshot(reading(enqueued=2, crawled=2, updated=1070), now=2000))
    assert done.endswith("done in 1:10")


def test_the_crawls_of_fed_lines_are_found_once_each_with_the_default_spider() -> None:
    lines = [
        '{"url": "http://a.com", "appid": "app", "crawlid": "c1"}',
        '{"url": "http://b.com", "appid": "app", "crawlid": "c1"}',
        '{"url": "http://b.com", "appid": "app", "crawlid": "c2", "spiderid": "wandering"}',
        '{"action": "info", "appid": "app", "uuid": "u", "spiderid": "link"}',
        "not json",
    ]
    assert progress.crawls_in(lines) == [CrawlRef("link", "app", "c1"), CrawlRef("wandering", "app", "c2")]


def test_a_member_of_the_crawl_registry_is_a_ref() -> None:
    assert CrawlRef.from_member(b"link\tapp\tc\t1") == CrawlRef("link", "app", "c\t1")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_screen_redraws_in_place_on_a_terminal_and_appends_elsewhere() -> None:
    tty, plain = _Terminal(), io.StringIO()
    for out in (tty, plain):
        screen = progress._Screen(out)
        screen.draw(["a", "b"])
        screen.draw(["a", "b"])  # unchanged: nothing written
        screen.draw(["c", "d"])
    assert plain.getvalue() == "a\nb\nc\nd\n"
    assert tty.getvalue() == "\x1b[2Ka\n\x1b[2Kb\n\x1b[2F\x1b[2Kc\n\x1b[2Kd\n"


def test_snapshot_counts_the_crawl_s_near_duplicates_for_the_dashboard() -> None:
    assert progress.snapshot(reading(enqueued=5, crawled=5, near_duplicates=3), now=1010.0)["near_duplicates"] == 3
    assert progress.snapshot(reading(enqueued=5, crawled=5), now=1010.0)["near_duplicates"] == 0
