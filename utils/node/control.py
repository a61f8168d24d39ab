"""Talk to a node's supervisord: start it, find its pid, call its XML-RPC over the unix socket, stop it.

Supervisord daemonizes (it is re-parented away from `shoal up`), so it is found again through its
pid file, checked against /proc so that a reused pid is not taken for it.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import xmlrpc.client
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from supervisor.xmlrpc import SupervisorTransport, UnixStreamHTTPConnection

from utils.config.errors import ShoalError
from utils.node.layout import NodeLayout, repo_root
from utils.services.process import log_tail, pid_alive, wait_gone

log = logging.getLogger(__name__)

RPC_TIMEOUT = 10.0  # seconds; one status call
STOP_RPC_TIMEOUT = 75.0  # seconds; a stop call waits for stopwaitsecs (30 s for crawlers) and the kill
START_TIMEOUT = 15.0  # seconds for supervisord to answer on its socket after it was launched
RPC_ERRORS = (OSError, xmlrpc.client.Error, http.client.HTTPException)


class NodeError(ShoalError):
    """Supervisord could not be started, reached or stopped."""


def supervisord_binary() -> Path:
    """`supervisord` next to our interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "supervisord"
    if beside.exists():
        return beside
    found = shutil.which("supervisord")
    if found is None:
        raise NodeError(f"supervisord not found next to {sys.executable} nor on PATH")
    return Path(found)


def _is_supervisord(pid: int) -> bool:
    """Whether `pid` runs supervisord (True where /proc cannot tell)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return True
    return b"supervisord" in cmdline


def running_pid(layout: NodeLayout) -> int | None:
    """The pid of the node's supervisord if it runs, else None (stale pid files are ignored)."""
    try:
        pid = int(layout.pid_path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) and _is_supervisord(pid) else None


class _TimedUnixConnection(UnixStreamHTTPConnection):  # type: ignore[misc]  # supervisor is untyped
    """Supervisor's unix-socket connection, with the socket timeout it leaves out."""

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socketfile)


def rpc(layout: NodeLayout, timeout: float = RPC_TIMEOUT) -> Any:
    """The node's XML-RPC root (`.supervisor.getAllProcessInfo()`...); calls fail after `timeout`."""
    transport = SupervisorTransport(None, None, f"unix://{layout.socket_path}")

    def connection() -> _TimedUnixConnection:
        conn = _TimedUnixConnection("localhost", timeout=timeout)
        conn.socketfile = str(layout.socket_path)
        return conn

    transport._get_connection = connection  # the stock factory has no timeout
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)


def process_info(layout: NodeLayout) -> list[dict[str, Any]]:
    """`supervisor.getAllProcessInfo()`: one dict per process (group, name, statename, pid, ...)."""
    infos: list[dict[str, Any]] = rpc(layout).supervisor.getAllProcessInfo()
    return infos


def _failure(layout: NodeLayout, what: str, output: str = "") -> NodeError:
    """A NodeError with supervisord's own output and the tail of its log."""
    details = output.strip() or log_tail(layout.supervisord_log)
    return NodeError(f"{what}; supervisord said:\n{details}")


def start_supervisord(layout: NodeLayout) -> int:
    """Launch supervisord on the rendered config and wait until it answers; its pid."""
    argv = [str(supervisord_binary()), "-c", str(layout.config_path)]
    log.debug("starting %s", " ".join(argv))
    try:
        done = subprocess.run(
            argv, cwd=repo_root(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=START_TIMEOUT, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NodeError(f"cannot run supervisord: {exc}") from exc
    if done.returncode != 0:
        raise _failure(layout, f"supervisord exited with code {done.returncode}", done.stderr + done.stdout)
    return _wait_answering(layout, START_TIMEOUT)


def _wait_answering(layout: NodeLayout, timeout: float) -> int:
    """Poll until the daemonized supervisord wrote its pid and answers getState."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = running_pid(layout)
        if pid is not None:
            with contextlib.suppress(*RPC_ERRORS):
                if rpc(layout, 2.0).supervisor.getState()["statename"] == "RUNNING":
                    return pid
        time.sleep(0.1)
    raise _failure(layout, f"supervisord did not answer on {layout.socket_path} within {timeout:g} s")


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid`, from /proc (the programs of a supervisord that does not answer)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="ascii", errors="replace").rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(stat.parent.name))
    return found


def kill_groups(pids: Iterable[int]) -> None:
    """SIGKILL the process group each pid leads (supervisord and each child lead their own)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)


def request_stop(layout: NodeLayout, pid: int) -> None:
    """Stop components first (spiders return leases to a live Redis), then the rest, then exit.

    Falls back to SIGTERM, on which supervisord stops its programs the same way, when the
    socket does not answer.
    """
    try:
        supervisor = rpc(layout, STOP_RPC_TIMEOUT).supervisor
        with contextlib.suppress(xmlrpc.client.Fault):  # no `shoal` group in a hand-edited config
            supervisor.stopProcessGroup("shoal")
        supervisor.stopAllProcesses()
        supervisor.shutdown()
    except RPC_ERRORS as exc:
        log.warning("supervisord (pid %d) did not take the stop request (%s); sending SIGTERM", pid, exc)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _running_children(layout: NodeLayout) -> list[dict[str, Any]]:
    """The programs that have a process right now (none when the socket does not answer)."""
    try:
        infos = process_info(layout)
    except RPC_ERRORS:
        return []
    running = [info for info in infos if int(info["pid"]) > 0]
    return sorted(running, key=lambda info: info["group"] == "services")  # the order they stop in


def stop_node(layout: NodeLayout, pid: int, timeout: float = 60) -> tuple[list[dict[str, Any]], bool]:
    """Stop the node: the programs that were running, and whether supervisord exited by itself.

    After `timeout` s it SIGKILLs supervisord's group and the group of each of its children (each
    program leads its own); only current children, so no pid recorded earlier and since reused.
    """
    children = _running_children(layout)
    request_stop(layout, pid)
    if wait_gone(pid, timeout):
        return children, True
    log.warning("supervisord (pid %d) still runs after %g s; killing it and its programs", pid, timeout)
    programs = children_of(pid)  # read while it lives: its children are re-parented when it dies
    kill_groups([pid, *programs])  # supervisord first, or it would respawn what we kill
    if wait_gone(pid, 5):
        layout.pid_path.unlink(missing_ok=True)
        layout.socket_path.unlink(missing_ok=True)
    return children, False
