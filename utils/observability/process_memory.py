"""Resident memory of a process and of a tree of processes (a browser is a dozen of them).

Summing RSS over Chromium's processes counts the pages they share once per process (its binary,
shared memory), which overstates the browser's cost several times; PSS (proportional set size,
from /proc/<pid>/smaps_rollup) divides each shared page among its users, so the sum is what the
tree really holds. Processes that end while being measured are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import psutil

MIB = 1024 * 1024


def process_rss(pid: int | None = None) -> int:
    """Resident bytes of one process (this one by default); 0 if it is gone."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def descendants(pid: int | None = None, match: Callable[[psutil.Process], bool] | None = None) -> list[psutil.Process]:
    """Every live descendant of `pid` (this process by default) that `match` accepts."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [child for child in children if match is None or _safe(match, child)]


def tree_pss(processes: Iterable[psutil.Process]) -> int:
    """Proportional resident bytes of `processes` together (RSS where PSS cannot be read)."""
    total = 0
    for process in processes:
        try:
            info = process.memory_full_info()
            total += int(getattr(info, "pss", info.rss))
        except psutil.AccessDenied:
            total += process_rss(process.pid)
        except psutil.Error:  # ended meanwhile
            continue
    return total


def named(*names: str) -> Callable[[psutil.Process], bool]:
    """A `match` for `descendants`: the process's name starts with one of `names`."""

    def match(process: psutil.Process) -> bool:
        return process.name().startswith(names)

    return match


def _safe(match: Callable[[psutil.Process], bool], process: psutil.Process) -> bool:
    try:
        return match(process)
    except psutil.Error:
        return False
