"""Hostile ZooKeeper domain configs against the real ZooKeeper (issue 24).

A NaN or infinite number in an update used to escape the watch callback and end kazoo's watch, so
every crawler ignored every later update. Now a bad update is refused (the last config is kept)
and the next good one is applied.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient

from utils.frontier.domain_config import DomainConfig
from utils.frontier.zookeeper import ConfigWatcher

pytestmark = pytest.mark.integration

BAD = [
    b"domains:\n  example.com: {hits: .nan, window: 60}\n",
    b"domains:\n  example.com: {hits: .inf, window: 60}\n",
    b"domains:\n  example.com: {hits: 10, window: .nan}\n",
    b"domains:\n  example.com: {hits: 10, window: 60, scale: .nan}\n",
    b"domains:\n  example.com: {hits: 10, window: 60, scale: -.inf}\n",
    b"domains:\n  example.com: {hits: [1], window: 60}\n",
    b"domains: [a, b]\n",
    b"blacklist: [{a: 1}]\n",
]


@pytest.mark.parametrize("bad", BAD)
def test_a_bad_update_is_refused_and_later_updates_still_apply(
    zk_client: KazooClient, services: Any, bad: bytes
) -> None:
    path = f"/shoal-test/{uuid.uuid4().hex}/domain_config"
    zk_client.create(path, b"domains:\n  example.com: {hits: 5, window: 60}\n", makepath=True)
    seen: list[DomainConfig] = []
    changed = threading.Condition()

    def on_change(config: DomainConfig) -> None:
        with changed:
            seen.append(config)
            changed.notify_all()

    def wait_for(hits: int) -> None:
        with changed:
            assert changed.wait_for(lambda: any(c.domains.get("example.com", None) and
                                                c.domains["example.com"].hits == hits for c in seen), 15)

    watcher = ConfigWatcher(KazooClient(hosts=services.zookeeper.address, timeout=6.0), path, on_change)
    watcher.start()
    try:
        wait_for(5)
        zk_client.set(path, bad)
        zk_client.set(path, b"domains:\n  example.com: {hits: 7, window: 60}\n")
        wait_for(7)
        assert all(c.domains["example.com"].hits in (5, 7) for c in seen)  # the bad one was never applied
    finally:
        watcher.stop()
