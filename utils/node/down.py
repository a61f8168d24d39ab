"""`shoal down`: stop every process of a node and its supervisord; idempotent."""

from __future__ import annotations

import argparse

from utils.config.settings import Settings
from utils.node.control import pid_alive, running_pid, stop_node
from utils.node.layout import command_layout

STOP_TIMEOUT = 60.0  # seconds for supervisord to stop its programs and exit before SIGKILL


def down_command(settings: Settings, args: argparse.Namespace) -> int:
    """Stop the node; 0 when nothing of it runs afterwards (also when nothing ran before)."""
    layout = command_layout(settings, args.node, "down")
    if layout is None:
        return 2
    pid = running_pid(layout)
    if pid is None:
        print(f"node {layout.node} is not running; nothing to stop")
        return 0
    print(f"stopping node {layout.node} (supervisord pid {pid})", flush=True)
    stopped, clean = stop_node(layout, pid, STOP_TIMEOUT)
    for info in stopped:
        print(f"  stopped {info['group']}:{info['name']} (pid {info['pid']})")
    if not clean:
        print(f"  supervisord did not exit within {STOP_TIMEOUT:g} s: killed it and its programs")
    if pid_alive(pid):
        print(f"shoal down: supervisord pid {pid} is still running")
        return 1
    print(f"node {layout.node} is down; logs stay in {layout.log_dir}")
    return 0
