"""The kafka monitor's success events: one INFO line per event per batch, a line per message at DEBUG."""

from __future__ import annotations

import logging

import pytest

from kafka_monitor.batch_log import SHOWN_IDS, LogEvent, log_batch

CRAWL = "Added crawl to Redis"


def crawl_events(n: int, crawls: int, detailed: bool = False) -> list[LogEvent]:
    return [(CRAWL, "app", f"c{i % crawls}", {"url": f"http://127.0.37.12/{i}", "parsed": True} if detailed else None)
            for i in range(n)]  # fmt: skip


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kafka_monitor.monitor" and r.levelno == level]


def test_info_logs_one_line_per_event_with_counts_per_appid_and_crawlid(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    log_batch([*crawl_events(5, 2), ("Added action to Redis", "other", "c0", None)])
    crawl, action = lines(caplog, logging.INFO)
    assert (crawl.getMessage(), crawl.count, crawl.appids, crawl.crawlids) == (CRAWL, 5, {"app": 5}, {"c0": 3, "c1": 2})
    assert (crawl.parsed, crawl.valid) == (True, True)
    assert (action.getMessage(), action.count, action.appids) == ("Added action to Redis", 1, {"other": 1})
    assert not lines(caplog, logging.DEBUG)


def test_many_crawl_ids_are_summarised(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    log_batch(crawl_events(SHOWN_IDS * 3, SHOWN_IDS + 5))
    (line,) = lines(caplog, logging.INFO)
    assert line.count == SHOWN_IDS * 3 and len(line.crawlids) == SHOWN_IDS  # noqa: PT018
    assert line.crawlids_more == 5 and not hasattr(line, "appids_more")  # noqa: PT018


def test_debug_adds_scrapy_clusters_line_per_message(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log_batch(crawl_events(3, 1, detailed=True))
    assert [r.url for r in lines(caplog, logging.DEBUG)] == ["http://127.0.37.12/0", "http://127.0.37.12/1", "http://127.0.37.12/2"]
    assert lines(caplog, logging.INFO)[0].count == 3
