"""Readiness probes: one bounded request each over a plain socket, True only on the expected answer.

Plain sockets rather than client libraries: a probe is polled every 0.1 s while a service starts,
so it must never retry, reconnect or hang on its own, and must not log or warn when refused.
A paused (SIGSTOPped) service accepts the TCP connection but never answers: the deadline covers it.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

PROBE_TIMEOUT = 1.0  # seconds for a whole probe: connect, send and read the answer

_METADATA_API_KEY = 3
_METADATA_VERSION = 1  # v1 takes an empty topic list as "no topics"; v0 would list them all
_CORRELATION_ID = 0x5A0A1
_CLIENT_ID = b"shoal-probe"


def exchange(
    host: str, port: int, request: bytes, complete: Callable[[bytes], bool], timeout: float
) -> bytes:
    """Send `request`, read until `complete(reply)` or EOF; raise OSError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    reply = b""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request)
        while not complete(reply):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no complete answer from {host}:{port} within {timeout} s")
            sock.settimeout(remaining)
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply


def redis_ready(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """PING answers +PONG; a Redis still loading its AOF answers -LOADING, which is not ready."""
    try:
        reply = exchange(host, port, b"PING\r\n", lambda r: b"\r\n" in r, timeout)
    except OSError:
        return False
    return reply.startswith(b"+PONG")


def zookeeper_ready(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """The `ruok` four-letter word answers `imok` (it must be whitelisted, as zoo.cfg does)."""
    try:
        reply = exchange(host, port, b"ruok", lambda r: len(r) >= 4, timeout)
    except OSError:
        return False
    return reply == b"imok"


def _metadata_request() -> bytes:
    """A size-prefixed Metadata v1 request for no topics (header v1: key, version, id, client)."""
    header = struct.pack(">hhih", _METADATA_API_KEY, _METADATA_VERSION, _CORRELATION_ID, len(_CLIENT_ID))
    payload = header + _CLIENT_ID + struct.pack(">i", 0)
    return struct.pack(">i", len(payload)) + payload


def _framed(reply: bytes) -> bool:
    """Whether `reply` holds a whole size-prefixed Kafka response."""
    return len(reply) >= 4 and len(reply) >= 4 + struct.unpack_from(">i", reply)[0]


def broker_ready(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """A Metadata request is answered with our correlation id and at least one broker."""
    try:
        reply = exchange(host, port, _metadata_request(), _framed, timeout)
    except OSError:
        return False
    if len(reply) < 12:
        return False
    correlation_id: int
    brokers: int
    correlation_id, brokers = struct.unpack_from(">ii", reply, 4)
    return correlation_id == _CORRELATION_ID and brokers >= 1


def port_open(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """Something accepts TCP connections: all a plain probe can learn of a TLS or SASL listener."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
