"""bench/node_cpu.py: each process's CPU goes to the root it descends from; the rest is "other"."""

from __future__ import annotations

import os

from bench import node_cpu
from bench.node_cpu import OTHER, TICK, UNATTRIBUTED, Snapshot


def test_children_count_for_their_root_and_strangers_for_other() -> None:
    # pid: (ticks, parent); 10 is the broker's launcher, 11 its JVM; 20 a crawler; 30 someone else's
    start = Snapshot(1000, {1: (0, 0), 10: (5, 1), 11: (100, 10), 20: (50, 1), 30: (7, 1)})
    end = Snapshot(1000 + 4 * TICK, {1: (0, 0), 10: (5, 1), 11: (100 + TICK, 10), 20: (50 + 2 * TICK, 1),
                                     30: (7 + TICK // 2, 1), 21: (TICK // 4, 20)})  # fmt: skip
    seconds = node_cpu.breakdown(start, end, {10: "broker", 20: "crawlers"})
    assert seconds["broker"] == 1.0
    assert seconds["crawlers"] == 2.25  # the child born inside the window counts from zero
    assert seconds[OTHER] == (TICK // 2) / TICK
    assert seconds["machine"] == 4.0
    assert abs(seconds[UNATTRIBUTED] - (4.0 - 3.25 - (TICK // 2) / TICK)) < 1e-9


def test_a_live_snapshot_holds_this_process_and_the_machine_busy_time() -> None:
    first = node_cpu.take()
    sum(i * i for i in range(200_000))
    second = node_cpu.take()
    assert os.getpid() in second.processes
    assert second.busy >= first.busy
    assert second.processes[os.getpid()][0] >= first.processes[os.getpid()][0]
