"""Busy CPU of the whole machine and of each process over a window, from /proc (issue 37).

`/proc/stat`'s busy time (every state but idle and iowait) is what the node pays, whatever runs
there: other load counts too. Each process's utime + stime from `/proc/<pid>/stat` is its own,
whatever else runs; a process is named by the root it descends from (a crawler, the broker's JVM,
Redis, ...), so every cost of a crawl has an owner and other load stays apart as "other".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")  # clock ticks per second of /proc's counters
OTHER = "other (not the bench)"
UNATTRIBUTED = "kernel, interrupts, exited processes"


@dataclass
class Snapshot:
    """Busy ticks of the machine and (ticks, parent pid) of every process, at one moment."""

    busy: int
    processes: dict[int, tuple[int, int]] = field(default_factory=dict)


def machine_busy() -> int:
    """Busy ticks of every CPU since boot: user + nice + system + irq + softirq + steal."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]) - fields[3] - fields[4]  # total (guest is inside user) minus idle and iowait


def take() -> Snapshot:
    snapshot = Snapshot(machine_busy())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        rest = stat.rsplit(")", 1)[1].split()
        snapshot.processes[int(entry.name)] = (int(rest[11]) + int(rest[12]), int(rest[1]))
    return snapshot


def owners(snapshot: Snapshot, roots: dict[int, str]) -> dict[int, str]:
    """The owner of each process: its own name in `roots`, else its nearest named ancestor's."""
    named: dict[int, str] = {}
    for pid in snapshot.processes:
        seen, current = [], pid
        while current and current not in roots and current not in named and current in snapshot.processes:
            seen.append(current)
            current = snapshot.processes[current][1]
        owner = roots.get(current) or named.get(current) or OTHER
        for visited in seen:
            named[visited] = owner
        if pid in roots:
            named[pid] = roots[pid]
    return named


def breakdown(start: Snapshot, end: Snapshot, roots: dict[int, str]) -> dict[str, float]:
    """CPU seconds per owner between two snapshots, plus the machine's busy total and what no
    live process accounts for; a process born inside the window counts from zero."""
    names = owners(end, roots)
    seconds: dict[str, float] = {}
    for pid, (ticks, _) in end.processes.items():
        before = start.processes.get(pid, (0, 0))[0]
        if ticks > before:
            owner = names.get(pid, OTHER)
            seconds[owner] = seconds.get(owner, 0.0) + (ticks - before) / TICK
    machine = (end.busy - start.busy) / TICK
    seconds[UNATTRIBUTED] = max(0.0, machine - sum(seconds.values()))
    seconds["machine"] = machine
    return seconds
