"""The idle cost of a node (issue 37): CPU % of one core per process of an up node with nothing to crawl.

A real `shoal up` (supervisord, the default local services and components) in a private run dir
on free ports; once every program runs and REST answers, it settles, then each process's
utime+stime (its threads and live descendants included) is read from /proc before and after the
window. Shoal's own processes are summed against the target (<= 2 % of one core); the services
and supervisord are reported apart. Run: `python -m bench.idle_node [--seconds 60] [--keep]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import print_checks, write_result
from utils.config.settings import Settings
from utils.node.control import process_info, running_pid
from utils.node.layout import NodeLayout, resolve_layout
from utils.services import free_ports

REPO = Path(__file__).resolve().parents[1]
NODE = "idle"
TARGET_PERCENT = 2.0  # issue 37: an idle node's Shoal processes together, % of one core
TICKS = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT = 180.0  # seconds for every program to run and REST to answer (a cold JVM broker: ~10 s)


def node_environ(root: Path, services: str) -> dict[str, str]:
    """`SHOAL_*` settings that put the node in `root` on free ports, as an operator would set them."""
    redis, kafka, zookeeper, rest, postgres = free_ports(5)
    env = {key: value for key, value in os.environ.items() if not key.startswith("SHOAL_")}
    env.update({
        "SHOAL_RUN_DIR": str(root), "SHOAL_LOCAL_SERVICES": services, "SHOAL_REDIS_PORT": str(redis),
        "SHOAL_KAFKA_HOSTS": f"127.0.0.1:{kafka}", "SHOAL_ZOOKEEPER_HOSTS": f"127.0.0.1:{zookeeper}",
        "SHOAL_REST_PORT": str(rest), "SHOAL_SINK_POSTGRES_DSN": f"postgresql://shoal@127.0.0.1:{postgres}/shoal",
        "SHOAL_SERVICE_DATA_ROOT": str(root / "service-data"),
    })  # fmt: skip
    return env


def shoal(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`shoal <args>` from the repository, as a user types it."""
    return subprocess.run([sys.executable, "-m", "utils.cli.main", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


@contextmanager
def idle_node(services: str, keep: bool = False) -> Iterator[tuple[NodeLayout, dict[str, str]]]:
    """A node up under a temporary run root; `shoal down` and removed afterwards (unless `keep`)."""
    root = Path(tempfile.mkdtemp(prefix="shoal-idle-"))
    root.chmod(0o755)  # PostgreSQL, started as root, runs as `postgres` with its data below it
    env = node_environ(root, services)
    layout = resolve_layout(Settings.load(environ=env), NODE)
    try:
        done = shoal(env, "up", "--node", NODE)
        if done.returncode != 0:
            raise SystemExit(f"shoal up failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        yield layout, env
    finally:
        if keep:
            print(f"kept: SHOAL_RUN_DIR={root} ... shoal down --node {NODE}; then rm -r {root}")
        else:
            shoal(env, "down", "--node", NODE)
            shutil.rmtree(root, ignore_errors=True)


def programs(layout: NodeLayout) -> dict[str, int]:
    """Pid of each running program by `group:name`, and supervisord's own."""
    infos = process_info(layout)
    found = {f"{i['group']}:{i['name']}": int(i["pid"]) for i in infos if i["statename"] == "RUNNING"}
    found["supervisord"] = running_pid(layout) or 0
    return found


def wait_ready(layout: NodeLayout, env: dict[str, str], timeout: float = READY_TIMEOUT) -> dict[str, int]:
    """Block until every autostarted program is RUNNING and REST answers `GET /`; their pids."""
    port = Settings.load(environ=env).get_int("REST_PORT")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        infos = process_info(layout)
        starting = [i["name"] for i in infos if i["statename"] in ("STARTING", "BACKOFF")]
        if not starting and rest_answers(port):
            return programs(layout)
        time.sleep(0.5)
    raise SystemExit(f"node not ready within {timeout:g} s: {[(i['name'], i['statename']) for i in infos]}")


def rest_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, utime+stime ticks) of a process (all its threads), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace").rpartition(")")[2].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[11]) + int(fields[12])


def tree_ticks(roots: dict[str, int]) -> dict[str, int]:
    """CPU ticks of each root's process tree (the root, its threads and its live descendants)."""
    stats = {int(p.name): s for p in Path("/proc").iterdir() if p.name.isdigit() and (s := _stat(int(p.name)))}
    children: dict[int, list[int]] = {}
    for pid, (parent, _ticks) in stats.items():
        children.setdefault(parent, []).append(pid)
    totals = {}
    for name, root in roots.items():
        todo, ticks = [root], 0
        while todo:
            pid = todo.pop()
            ticks += stats.get(pid, (0, 0))[1]
            todo.extend(p for p in children.get(pid, []) if name != "supervisord")  # its children are the programs
        totals[name] = ticks
    return totals


def loadavg() -> str:
    return Path("/proc/loadavg").read_text(encoding="ascii").strip()


def measure(roots: dict[str, int], seconds: float) -> dict[str, float]:
    """CPU % of one core of each process tree over `seconds`."""
    before, started = tree_ticks(roots), time.monotonic()
    time.sleep(seconds)
    after, elapsed = tree_ticks(roots), time.monotonic() - started
    return {name: round(100 * (after[name] - before[name]) / TICKS / elapsed, 2) for name in roots}


def table(percent: dict[str, float]) -> str:
    shoal = {k: v for k, v in percent.items() if k.startswith("shoal:")}
    services = {k: v for k, v in percent.items() if k not in shoal}
    lines = [f"{'process':<28} {'CPU % of one core':>18}", "-" * 47]
    for title, group in (("Shoal processes", shoal), ("services", services)):
        lines += [f"  {name:<26} {value:>18.2f}" for name, value in sorted(group.items(), key=lambda kv: -kv[1])]
        lines.append(f"{title + ' (total)':<28} {sum(group.values()):>18.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the measured window")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to wait once everything answers")
    parser.add_argument("--services", default="kafka,redis,zookeeper", help="local services (LOCAL_SERVICES)")
    parser.add_argument("--keep", action="store_true", help="leave the node up afterwards (for py-spy)")
    args = parser.parse_args()
    with idle_node(args.services, args.keep) as (layout, env):
        roots = wait_ready(layout, env)
        time.sleep(args.settle)
        load_before = loadavg()
        percent = measure(roots, args.seconds)
        load_after = loadavg()
        if args.keep:
            print("pids:", roots)
    shoal_total = round(sum(v for k, v in percent.items() if k.startswith("shoal:")), 2)
    figures: dict[str, Any] = {
        "seconds": args.seconds, "loadavg_before": load_before, "loadavg_after": load_after,
        "shoal_total_percent": shoal_total,
        "services_total_percent": round(sum(v for k, v in percent.items() if not k.startswith("shoal:")), 2),
        **{f"percent {name}": value for name, value in percent.items()},
    }  # fmt: skip
    checks = {f"Shoal processes <= {TARGET_PERCENT:g} % of one core idle": shoal_total <= TARGET_PERCENT}
    print(table(percent))
    print(f"loadavg before: {load_before}; after: {load_after}; window {args.seconds:g} s")
    print_checks(checks)
    print(f"written: {write_result('idle_node', figures, checks)}")


if __name__ == "__main__":
    main()
