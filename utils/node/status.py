"""`shoal status`: every process of a node from its supervisord, as a table or as JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from utils.config.settings import Settings
from utils.node.control import RPC_ERRORS, process_info, running_pid
from utils.node.data_dirs import data_dirs
from utils.node.layout import NodeLayout, command_layout, recorded_addresses
from utils.observability.metrics.health import unreachable
from utils.observability.metrics.publish import read_url, url_file

REACH_TIMEOUT = 1.0  # seconds a process's /metrics has to answer `shoal status`


def _uptime(info: dict[str, Any]) -> int:
    """Seconds since the process started, 0 unless it is RUNNING."""
    if info.get("statename") != "RUNNING" or not info.get("start"):
        return 0
    return max(int(info["now"]) - int(info["start"]), 0)


def _clock(seconds: int) -> str:
    """`1 day, 2:03:04`-style uptime, as supervisorctl prints it."""
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days} day{'s' if days != 1 else ''}, {text}" if days else text


def process_rows(infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The JSON form of getAllProcessInfo: `group:name`, state, pid (0 when not running), uptime."""
    return [
        {
            "name": f"{info['group']}:{info['name']}",
            "state": info["statename"],
            "pid": int(info["pid"]),
            "uptime": _uptime(info),
            "exitstatus": int(info["exitstatus"]),
            "description": info["description"],
            "log": info["stdout_logfile"],
        }
        for info in infos
    ]


def add_metrics_urls(rows: list[dict[str, Any]], layout: NodeLayout) -> list[dict[str, Any]]:
    """Each row with `metrics_url`: the URL its current process published, else None (services,
    stopped programs, metrics off); see utils/observability/metrics/publish.py."""
    for row in rows:
        program = row["name"].partition(":")[2]
        row["metrics_url"] = read_url(url_file(layout.run_dir, program), row["pid"]) if row["pid"] else None
    return rows


def add_unreachable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row with `unreachable`: the services its process reports it cannot reach (its
    `shoal_dependency_up` samples at 0); None when it serves no metrics or they do not answer."""
    for row in rows:
        row["unreachable"] = None
        if row.get("metrics_url"):
            with contextlib.suppress(OSError, ValueError):
                row["unreachable"] = unreachable(row["metrics_url"], REACH_TIMEOUT)
    return rows


def format_metrics(rows: list[dict[str, Any]]) -> str:
    """One line per process that serves metrics."""
    return "\n".join(f"  {row['name']:<24} {row['metrics_url']}" for row in rows if row.get("metrics_url"))


def format_table(rows: list[dict[str, Any]]) -> str:
    """A NAME / STATE / PID / UPTIME table."""
    width = max([len("NAME"), *(len(row["name"]) for row in rows)])
    lines = [f"{'NAME':<{width}}  {'STATE':<9} {'PID':>7}  UPTIME"]
    for row in rows:
        pid = str(row["pid"]) if row["pid"] else "-"
        uptime = _clock(row["uptime"]) if row["state"] == "RUNNING" else row["description"]
        down = f"  cannot reach {', '.join(row['unreachable'])}" if row.get("unreachable") else ""
        lines.append(f"{row['name']:<{width}}  {row['state']:<9} {pid:>7}  {uptime}{down}")
    return "\n".join(lines)


def format_addresses(addresses: dict[str, str], local: tuple[str, ...] | None = None) -> str:
    """One line per service address; `local` marks the ones this node runs."""
    lines = []
    for name, address in addresses.items():
        where = "" if local is None else (" (this node)" if name in local else " (remote)")
        shown = f"http://{address}" if name == "rest" else address
        lines.append(f"  {name:<10} {shown}{'' if name == 'rest' else where}")
    return "\n".join(lines)


def service_data(settings: Settings, layout: NodeLayout) -> dict[str, str]:
    """Where each local service keeps its data (utils/node/data_dirs.py), as strings."""
    found = data_dirs(layout, Path(settings.get_str("SERVICE_DATA_ROOT")))
    return {name: str(path) for name, path in found.items()}


def format_data(data: dict[str, str]) -> str:
    """One line per local service: where its data is."""
    return "\n".join(f"  {name:<10} {path}" for name, path in data.items())


def _not_running(settings: Settings, layout: NodeLayout, as_json: bool, why: str) -> int:
    data = service_data(settings, layout)
    if as_json:
        report = {"node": layout.node, "running": False, "processes": [],
                  "services": recorded_addresses(layout), "data": data}  # fmt: skip
        print(json.dumps(report, indent=2))
        return 1
    print(f"node {layout.node} is not running ({why}); start it with `shoal up --node {layout.node}`")
    if data:
        print("data:")
        print(format_data(data))
    return 1


def status_command(settings: Settings, args: argparse.Namespace) -> int:
    """Print the node's processes; exit 1 when its supervisord does not run or answer."""
    layout = command_layout(settings, args.node, "status")
    if layout is None:
        return 2
    pid = running_pid(layout)
    if pid is None:
        return _not_running(settings, layout, args.json, f"no supervisord for {layout.pid_path}")
    try:
        rows = add_unreachable(add_metrics_urls(process_rows(process_info(layout)), layout))
    except RPC_ERRORS as exc:
        return _not_running(settings, layout, args.json, f"supervisord pid {pid} does not answer: {exc}")
    addresses = recorded_addresses(layout)
    data = service_data(settings, layout)
    if args.json:
        report = {
            "node": layout.node, "running": True, "supervisord_pid": pid, "run_dir": str(layout.run_dir),
            "processes": rows, "services": addresses, "data": data,
        }  # fmt: skip
        print(json.dumps(report, indent=2))
        return 0
    print(f"node {layout.node}: supervisord pid {pid}, run dir {layout.run_dir}")
    print(format_table(rows))
    print("addresses:")
    print(format_addresses(addresses))
    if data:
        print("data:")
        print(format_data(data))
    metrics = format_metrics(rows)
    if metrics:
        print("metrics:")
        print(metrics)
    from utils.frontier.progress import render_crawls  # the running crawls, with progress bars

    print(render_crawls(settings))
    return 0
