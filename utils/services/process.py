"""One local service process: started in its own process group, polled until it answers, stopped.

Each service runs in a new session so that signals reach the whole group (Redis forks for AOF
rewrites) and a Ctrl-C in the terminal of the test run does not hit the services before teardown.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from utils.config.errors import ShoalError

log = logging.getLogger(__name__)

Probe = Callable[[str, int], bool]

LOG_TAIL_LINES = 40
POLL_INTERVAL = 0.1  # seconds between readiness probes


class ServiceError(ShoalError):
    """A local service could not be started, did not answer in time, or died while starting."""


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LISTEN_PORTS_FROM = 10000  # ports below are the well-known and registered services' usual ones
PORT_TRIES = 200
POOL_MIN = 1000  # a smaller pool (an ephemeral range that leaves little room): the kernel picks


def listen_port_pool() -> range:
    """Ports outside the kernel's ephemeral range (from which every outgoing connection takes its
    local port): a port handed out here cannot be taken by some client's connection before the
    service binds it, as a port the kernel picked (bind to port 0) can on a busy machine."""
    try:
        low, high = (int(n) for n in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    below, above = range(LISTEN_PORTS_FROM, low), range(high + 1, 65536)
    return below if len(below) >= len(above) else above


def _candidate_ports() -> list[int]:
    """Ports to try, in random order: some of the listening pool, none if the pool is too small."""
    pool = listen_port_pool()
    return random.sample(pool, min(PORT_TRIES, len(pool))) if len(pool) >= POOL_MIN else []


def _bound(sock: socket.socket, host: str, port: int) -> bool:
    try:
        sock.bind((host, port))
    except OSError:
        return False
    return True


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free right now, outside the ephemeral range when it leaves room (all
    held open together, so they never repeat); else ports the kernel picks (port 0)."""
    with contextlib.ExitStack() as stack:
        socks: list[socket.socket] = []
        for port in [*_candidate_ports(), *[0] * count]:
            if len(socks) == count:
                break
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            if _bound(sock, host, port):
                socks.append(sock)
        if len(socks) < count:
            raise OSError(f"{host}: only {len(socks)} of {count} free ports found")
        return [int(sock.getsockname()[1]) for sock in socks]


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now; another server may still bind it before the service does."""
    return free_ports(1, host)[0]


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on `port` (SO_REUSEADDR: a port in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of a service log, for error messages."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except OSError as exc:
        return f"(no log: {exc})"


def _signal_group(pid: int, signum: signal.Signals) -> None:
    """Send `signum` to the process group led by `pid`; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signum)


class LocalService:
    """A service process on a fixed port with its own data dir, log file and optional pid file."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        port: int,
        log_path: Path,
        data_dir: Path,
        probe: Probe,
        host: str = "127.0.0.1",
        pid_path: Path | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.stop_signal = stop_signal  # PostgreSQL: SIGINT (its SIGTERM waits for every client)
        self.argv = list(argv)
        self.port = port
        self.host = host
        self.log_path = log_path
        self.data_dir = data_dir
        self.probe = probe
        self.pid_path = pid_path
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"<LocalService {self.name} {self.address} pid={self.pid}>"

    @property
    def address(self) -> str:
        """`host:port`, as clients take it."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The pid (and process group id) of the running service, None when it is not running."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the process was started and has not exited (a paused one is running)."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Spawn the process with output appended to `log_path`; does not wait for it to answer."""
        if self.running:
            raise ServiceError(f"{self.name} is already running as pid {self.pid}")
        if port_in_use(self.host, self.port):
            raise ServiceError(f"{self.name}: port {self.port} is already in use by another process")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as output:
            try:
                self._proc = subprocess.Popen(
                    self.argv, cwd=self.data_dir, stdin=subprocess.DEVNULL, stdout=output,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            except OSError as exc:
                raise ServiceError(f"{self.name}: cannot run {self.argv[0]}: {exc}") from exc
        if self.pid_path is not None:
            self.pid_path.write_text(f"{self._proc.pid}\n", encoding="ascii")
        log.info("started %s on %s as pid %d, log %s", self.name, self.address, self._proc.pid, self.log_path)

    def wait_ready(self, timeout: float = 30) -> None:
        """Poll the probe every 0.1 s; ServiceError with the log tail if it exits or stays silent."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                raise self._error(self._exit_reason())
            if self.probe(self.host, self.port) and self.running:
                log.info("%s answers on %s", self.name, self.address)
                return
            if time.monotonic() >= deadline:
                raise self._error(f"did not answer within {timeout:g} s")
            time.sleep(POLL_INTERVAL)

    def stop(self, timeout: float = 10) -> None:
        """`stop_signal` to the group (resuming it if paused), SIGKILL after `timeout` seconds; reaps it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, self.stop_signal)
            _signal_group(proc.pid, signal.SIGCONT)  # a stopped process handles SIGTERM only after
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s ignored %s for %g s, killing it", self.name, self.stop_signal.name, timeout)
                _signal_group(proc.pid, signal.SIGKILL)
        self._reap(proc)

    def kill(self) -> None:
        """SIGKILL the group, as a crash would (fault tests); data not yet fsynced is lost."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGKILL)
        self._reap(proc)

    def pause(self) -> None:
        """SIGSTOP the group: the port stays open but nothing answers (fault tests)."""
        self._signal_running(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the group after pause()."""
        self._signal_running(signal.SIGCONT)

    def restart(self, timeout: float = 30) -> None:
        """Stop, start again on the same port and data dir, and wait until it answers."""
        self.stop()
        self.start()
        self.wait_ready(timeout)

    def _signal_running(self, signum: signal.Signals) -> None:
        """Signal the group of the running process; ServiceError if there is none."""
        if self._proc is None or not self.running:
            raise ServiceError(f"{self.name} is not running")
        _signal_group(self._proc.pid, signum)
        log.info("sent %s to %s (pid %d)", signum.name, self.name, self._proc.pid)

    def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        """Wait for the exiting process, forget it and drop its pid file."""
        code = proc.wait()
        self._proc = None
        log.info("%s (pid %d) exited with code %d", self.name, proc.pid, code)
        if self.pid_path is not None:
            self.pid_path.unlink(missing_ok=True)

    def _exit_reason(self) -> str:
        if self._proc is None:
            return "is not started"
        return f"exited with code {self._proc.returncode} before answering"

    def _error(self, what: str) -> ServiceError:
        """A ServiceError naming the service and carrying the tail of its log."""
        tail = log_tail(self.log_path)
        return ServiceError(
            f"{self.name} on {self.address} {what}; last {LOG_TAIL_LINES} lines of {self.log_path}:\n{tail}"
        )


def _zombie(pid: int) -> bool:
    """Whether `pid` has exited but is not reaped (an orphan under an init that does not reap)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def pid_alive(pid: int) -> bool:
    """Whether `pid` still runs; a zombie counts as gone (a child of ours that exited is reaped here)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not _zombie(pid):
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False


def wait_gone(pid: int, timeout: float) -> bool:
    """Poll until `pid` is gone; False if it is still there after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def stop_by_pidfile(run_dir: Path, name: str, timeout: float = 10) -> bool:
    """Stop service `name` from `run_dir/<name>.pid`, for a process that did not start it.

    SIGTERM to its group, SIGKILL after `timeout` s. Returns False when there was nothing to stop
    (no pid file, a stale pid, or a pid that no longer leads its own group, i.e. was reused).
    """
    pid_path = run_dir / f"{name}.pid"
    try:
        pid = int(pid_path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return False
    try:
        leads_group = os.getpgid(pid) == pid
    except ProcessLookupError:
        leads_group = False
    if not leads_group:
        pid_path.unlink(missing_ok=True)
        return False
    _signal_group(pid, signal.SIGTERM)
    _signal_group(pid, signal.SIGCONT)
    if not wait_gone(pid, timeout):
        _signal_group(pid, signal.SIGKILL)
        wait_gone(pid, timeout)
    pid_path.unlink(missing_ok=True)
    log.info("stopped %s (pid %d) from %s", name, pid, pid_path)
    return True
