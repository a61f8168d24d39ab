"""The render process's per-phase sums (what its close log says per page) and its Chromium command line."""

from __future__ import annotations

import pytest

from crawler import render_stats
from crawler.browser import CHROMIUM_ARGS, chromium_args
from crawler.render_stats import Phases


def test_phases_are_milliseconds_per_page_and_tab_idle_counts_free_tabs(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(render_stats.time, "monotonic", lambda: clock[0])
    phases = Phases(tabs=2)
    clock[0] = 105.0  # before the first page: start-up, not idle tabs
    phases.tab_taken()  # 1 of 2 tabs busy for 1 s: 1 tab-second idle
    clock[0] = 106.0
    phases.tab_taken()  # both busy for 1 s: none idle
    clock[0] = 107.0
    phases.tab_freed()
    phases.tab_freed()  # both free for 0.5 s: 1 tab-second idle
    clock[0] = 107.5
    phases.add("goto", 0.3)
    phases.add("goto", 0.1)
    assert phases.summary(pages=2) == {"goto": 200.0, "tab_idle": 1000.0}


def test_images_are_blocked_by_chromium_itself_only_when_blocked() -> None:
    flag = "--blink-settings=imagesEnabled=false"
    assert chromium_args(frozenset({"image", "font"})) == [*CHROMIUM_ARGS, flag]
    assert flag not in chromium_args(frozenset({"media", "font"}))
