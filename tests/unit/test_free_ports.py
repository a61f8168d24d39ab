"""Ports for the services a test or `shoal up` starts: outside the kernel's ephemeral range, where
no outgoing connection can take one between the pick and the service's bind."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from utils.services import process
from utils.services.process import free_ports, listen_port_pool


def test_ports_come_from_below_the_ephemeral_range_distinct_and_free() -> None:
    low, _high = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(process.LISTEN_PORTS_FROM <= port < low for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = tmp_path / "range"
    ranges.write_text("10020 65535\n")  # a pool of 20 ports: 10000-10019
    monkeypatch.setattr(process, "EPHEMERAL_RANGE_FILE", ranges)
    monkeypatch.setattr(process, "POOL_MIN", 10)
    assert listen_port_pool() == range(10000, 10020)
    held: list[socket.socket] = []
    try:
        for port in range(10000, 10020):
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # someone else's already: not free either
                sock.close()
                continue
            held.append(sock)
        left = []
        for sock in held[-2:]:  # two ports of the pool let go: the only free ones
            left.append(sock.getsockname()[1])
            sock.close()
        ports = free_ports(2)
    finally:
        for sock in held:
            sock.close()
    assert sorted(ports) == sorted(left)


def test_a_range_that_leaves_no_room_falls_back_to_the_kernels_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranges = tmp_path / "range"
    ranges.write_text("1024 65535\n")
    monkeypatch.setattr(process, "EPHEMERAL_RANGE_FILE", ranges)
    assert len(listen_port_pool()) < 1000
    (port,) = free_ports(1)
    assert 1024 <= port <= 65535
