"""Debian's PostgreSQL as a local service: initdb into a data directory, then `postgres` in the foreground.

Used by the test fixtures, the sink benchmark and `shoal up --services ...,postgres`. PostgreSQL
refuses to run as root (initdb and postgres both exit), so as root every command is run through
`setpriv` as the `postgres` user the Debian package creates, and the data directory is given to
that user; `setpriv` execs, so the pid supervisord or the tests hold is the server's own.
The server listens on 127.0.0.1 only (TCP, no unix socket) and stops fast on SIGINT.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import struct
import subprocess
from pathlib import Path

from utils.services.probes import PROBE_TIMEOUT, exchange
from utils.services.process import LocalService, ServiceError

HOST = "127.0.0.1"
PG_ROOT = Path("/usr/lib/postgresql")  # Debian: /usr/lib/postgresql/<major>/bin/{initdb,postgres}
RUN_AS = "postgres"  # the system user of Debian's postgresql-common
SUPERUSER = "shoal"  # the cluster's superuser (initdb -U), the sink's default role
DATABASE = "shoal"  # created once after initdb, the sink's default database
_PROTOCOL_3 = 196608
_NOT_READY = b"57P03"  # SQLSTATE cannot_connect_now: starting up, shutting down or in recovery


class PostgresError(RuntimeError):
    """PostgreSQL is not installed, or initdb failed (its output is in the message)."""


def bin_dir() -> Path:
    """The bin directory of the newest PostgreSQL major version installed."""
    versions = sorted(
        (p for p in PG_ROOT.glob("*") if (p / "bin" / "postgres").exists()), key=lambda p: int(p.name)
    ) if PG_ROOT.exists() else []  # fmt: skip
    if not versions:
        raise PostgresError(f"no PostgreSQL under {PG_ROOT}: install Debian's postgresql package (make system-deps)")
    return versions[-1] / "bin"


def _as_server_user(argv: list[str]) -> list[str]:
    """`argv` run as the postgres user when we are root (PostgreSQL refuses root), else as it is."""
    if os.geteuid() != 0:
        return argv
    return ["setpriv", f"--reuid={RUN_AS}", f"--regid={RUN_AS}", "--clear-groups", "--", *argv]


def _give_to_server_user(path: Path) -> None:
    """As root: the data directory belongs to the postgres user (mode 0700, as PostgreSQL demands)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    if os.geteuid() == 0:
        user = pwd.getpwnam(RUN_AS)
        shutil.chown(path, user.pw_uid, user.pw_gid)


def _check_reachable(path: Path) -> None:
    """As root: PostgreSQL (running as `postgres`) must be able to enter every parent of its data dir."""
    if os.geteuid() != 0:
        return
    for parent in path.absolute().parents:
        if parent.stat().st_mode & 0o001 == 0:
            raise PostgresError(f"{parent} is not searchable by the {RUN_AS} user (mode o+x is needed) "
                                f"for the data directory {path}")  # fmt: skip


def _write_private(path: Path, text: str) -> None:
    """Write `text` to a new file that is mode 0600 from its creation (never readable by others, even
    for a moment), owned by the server user when we are root."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        if os.geteuid() == 0:
            user = pwd.getpwnam(RUN_AS)
            os.fchown(out.fileno(), user.pw_uid, user.pw_gid)
        out.write(text)


def initialized(data_dir: Path) -> bool:
    return (data_dir / "PG_VERSION").exists()


def init_cluster(data_dir: Path, password: str = "") -> None:
    """initdb `data_dir` (superuser `shoal`, UTF-8) and create the database `shoal`; no-op when done.

    With a password, TCP logins need it (scram-sha-256); without, local TCP logins are trusted.
    """
    if initialized(data_dir):
        return
    _check_reachable(data_dir)
    _give_to_server_user(data_dir)
    argv = [str(bin_dir() / "initdb"), "-D", str(data_dir.absolute()), "-U", SUPERUSER, "-E", "UTF8",
            "--locale=C.UTF-8", "--no-sync", "--no-instructions"]  # fmt: skip
    pwfile = data_dir.parent / f".{data_dir.name}.initdb.pw"  # beside: initdb wants an empty directory
    if password:
        _write_private(pwfile, password + "\n")
        argv += [f"--pwfile={pwfile}", "--auth-host=scram-sha-256", "--auth-local=trust"]
    else:
        argv += ["--auth=trust"]
    try:
        _run(argv, "initdb")
        single = [str(bin_dir() / "postgres"), "--single", "-D", str(data_dir.absolute()), "postgres"]
        _run(single, "CREATE DATABASE", stdin=f"CREATE DATABASE {DATABASE};\n")
    finally:
        pwfile.unlink(missing_ok=True)


def _run(argv: list[str], what: str, stdin: str | None = None) -> None:
    done = subprocess.run(_as_server_user(argv), input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PostgresError(f"{what} failed ({done.returncode}): {done.stdout}{done.stderr}")


def postgres_argv(port: int, data_dir: Path, password: str = "") -> list[str]:
    """Init `data_dir` if needed, then the server's command line: 127.0.0.1:`port`, no unix socket."""
    init_cluster(data_dir, password)
    return _as_server_user([
        str(bin_dir() / "postgres"),
        "-D", str(data_dir.absolute()),
        "-p", str(port),
        "-c", f"listen_addresses={HOST}",
        "-c", "unix_socket_directories=",
        "-c", "max_connections=200",  # a test session opens one pool per sink and per test
        "-c", "logging_collector=off",
    ])  # fmt: skip


def _startup_packet() -> bytes:
    body = struct.pack(">i", _PROTOCOL_3) + b"user\0shoal-probe\0database\0postgres\0\0"
    return struct.pack(">i", len(body) + 4) + body


def _first_message(reply: bytes) -> bool:
    return len(reply) >= 5 and len(reply) >= 1 + struct.unpack_from(">i", reply, 1)[0]


def postgres_ready(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """A startup message is answered with an authentication request or any error but "starting up".

    A role that does not exist is refused only once the server accepts connections, so the probe
    needs no credentials.
    """
    try:
        reply = exchange(host, port, _startup_packet(), _first_message, timeout)
    except OSError:
        return False
    if reply[:1] == b"R":
        return True
    return reply[:1] == b"E" and b"C" + _NOT_READY not in reply


def postgres_service(run_dir: Path, port: int, password: str = "", name: str = "postgres") -> LocalService:
    """A not yet started PostgreSQL under `run_dir` (data in `<name>/`, `<name>.log`, `<name>.pid`);
    initdb runs here, once. Stops with SIGINT: fast shutdown, open sessions are cut."""
    data_dir = run_dir / name
    try:
        argv = postgres_argv(port, data_dir, password)
    except OSError as exc:
        raise ServiceError(f"{name}: cannot prepare {data_dir}: {exc}") from exc
    except PostgresError as exc:
        raise ServiceError(f"{name}: {exc}") from exc
    return LocalService(
        name=name, argv=argv, port=port, log_path=run_dir / f"{name}.log", data_dir=data_dir,
        probe=postgres_ready, host=HOST, pid_path=run_dir / f"{name}.pid", stop_signal=signal.SIGINT,
    )  # fmt: skip
