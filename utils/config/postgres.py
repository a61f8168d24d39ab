"""The PostgreSQL client factory: the DSN of the settings with the password from the environment or a file.

The password is never part of SINK_POSTGRES_DSN as logged: it is read from SINK_POSTGRES_PASSWORD
(set as SHOAL_SINK_POSTGRES_PASSWORD) or SINK_POSTGRES_PASSWORD_FILE and handed to libpq as a
separate parameter; libpq's own PGPASSWORD and ~/.pgpass still apply when neither is set.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from utils.config.errors import ConfigError
from utils.config.redact import redact_dsn
from utils.config.settings import Settings

APPLICATION_NAME = "shoal"
# libpq has no read timeout: a peer that vanished (no FIN) would hold a query forever. TCP keepalives
# find a silent idle connection (10 s, then 3 probes 5 s apart: dead after ~25 s) and
# tcp_user_timeout fails a write the peer never acknowledges (a COPY into a dead link) after 30 s.
TCP_OPTIONS: dict[str, int] = {
    "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
    "tcp_user_timeout": 30000,
}  # fmt: skip


def postgres_password(settings: Settings) -> str:
    """The password: the first line of SINK_POSTGRES_PASSWORD_FILE, else SINK_POSTGRES_PASSWORD."""
    path = settings.get_str("SINK_POSTGRES_PASSWORD_FILE")
    if not path:
        return settings.get_str("SINK_POSTGRES_PASSWORD")
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"SINK_POSTGRES_PASSWORD_FILE: cannot read {path}: {exc.strerror}") from None
    return lines[0] if lines else ""


def postgres_conninfo(settings: Settings) -> str:
    """The full libpq connection string (with the password: never log it, log `postgres_target`)."""
    extra: dict[str, str | int | None] = {
        "connect_timeout": max(settings.get_int("SINK_POSTGRES_CONNECT_TIMEOUT"), 2),  # libpq's minimum
        "application_name": APPLICATION_NAME,
        **TCP_OPTIONS,
    }
    password = postgres_password(settings)
    if password:
        extra["password"] = password
    try:
        return conninfo.make_conninfo(settings.get_str("SINK_POSTGRES_DSN"), **extra)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"SINK_POSTGRES_DSN is not a libpq connection string: {redact_dsn(str(exc))}") from None


def postgres_target(settings: Settings) -> str:
    """The DSN as it may be logged: without any password."""
    return redact_dsn(settings.get_str("SINK_POSTGRES_DSN"))


def postgres_address(settings: Settings, default_host: str, default_port: int) -> tuple[str, int]:
    """Host and port of SINK_POSTGRES_DSN (the first, when it lists several); a unix socket path
    or a DSN that does not parse gives the defaults (`shoal up` reports the port it would use)."""
    try:
        params = conninfo.conninfo_to_dict(settings.get_str("SINK_POSTGRES_DSN"))
    except psycopg.ProgrammingError:
        return default_host, default_port
    host = str(params.get("host") or default_host).split(",")[0]
    port = str(params.get("port") or default_port).split(",")[0]
    if host.startswith("/") or not port.isdigit():
        return default_host, default_port
    return host, int(port)


def postgres_connect(settings: Settings, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A new connection with the session time zone UTC (page timestamps are UTC without a zone)."""
    connection = psycopg.connect(postgres_conninfo(settings), autocommit=autocommit)
    connection.execute("SET TIME ZONE 'UTC'")
    if not autocommit:
        connection.commit()
    return connection


def close_quietly(connection: psycopg.Connection[Any] | None) -> None:
    """Close `connection` if there is one; a connection that is already broken may fail to close, which
    changes nothing for a caller about to drop it."""
    if connection is None:
        return
    try:
        connection.close()
    except psycopg.Error:
        pass


@contextlib.contextmanager
def operation_deadline(connection: psycopg.Connection[Any], seconds: float) -> Iterator[None]:
    """Fail whatever `connection` does inside the block once it has taken `seconds` (0: no bound).

    libpq has no read timeout, and a peer that takes the bytes but never answers (a stalled server, a
    proxy or load balancer holding a link whose far end is gone) defeats TCP keepalives and
    tcp_user_timeout alike: the kernel acknowledges everything. Past the deadline the connection's
    socket is shut down, so the blocked call fails with an OperationalError and the caller drops the
    connection, as after any other network error.
    """
    if seconds <= 0 or connection.closed:
        yield
        return
    timer = threading.Timer(seconds, _shut_down, args=(connection.fileno(),))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _shut_down(fd: int) -> None:
    """Shut the socket behind `fd` down both ways (a duplicate of the descriptor: libpq keeps its own)."""
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed meanwhile: the operation ended
