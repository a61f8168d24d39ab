"""Hostile ZooKeeper domain configs against the real ZooKeeper (issue 24).

A NaN or infinite number in an update used to escape the watch callback and end kazoo's watch, so
every crawler ignored every later update. Now a bad update is refused (the last config is kept)
and the next good one is applied.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from redis_monitor.plugins.zookeeper import ZookeeperMonitor
from tests.support.services import wait_until
from utils.config.clients import zookeeper_client
from utils.config.settings import Settings, default_values
from utils.frontier.domain_config import DomainConfig
from utils.frontier.domains import url_domain
from utils.frontier.throttle import ThrottleConfig
from utils.frontier.zookeeper import ConfigWatcher
from utils.services import free_port

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


@pytest.mark.single_redis
def test_with_zookeeper_auth_the_config_node_is_the_users_alone(cluster: Any, zk_client: KazooClient) -> None:
    """Without credentials anyone reaching ZooKeeper could rewrite every crawler's throttle and blacklist."""
    settings = cluster.settings.copy_with(ZOOKEEPER_AUTH="shoal:zk-secret",
                                          ZOOKEEPER_ASSIGN_PATH=f"/shoal-acl-{uuid.uuid4().hex}/")  # fmt: skip
    writer = ZookeeperMonitor.from_settings(settings, None)  # type: ignore[arg-type]
    try:
        writer.update({"action": "domain-update", "domain": "example.com", "hits": 5, "window": 60, "scale": 1.0})
    finally:
        writer.close()
    path = settings.zookeeper_config_path
    for denied in (zk_client.get, zk_client.get_acls):
        with pytest.raises(NoAuthError):
            denied(path)
    with pytest.raises(NoAuthError):
        zk_client.set(path, b"blacklist: [example.com]\n")

    seen: list[DomainConfig] = []
    got = threading.Event()
    watcher = ConfigWatcher(zookeeper_client(settings), path, lambda config: (seen.append(config), got.set()))
    watcher.start()
    try:
        assert got.wait(15)
        assert seen[-1].domains["example.com"].hits == 5
        acls, _ = watcher.client.get_acls(path)
        assert [(acl.id.scheme, acl.id.id.split(":")[0]) for acl in acls] == [("digest", "shoal")]
    finally:
        watcher.stop()


def test_a_spider_pops_only_once_the_zookeeper_blacklist_is_read(zk_client: KazooClient, services: Any) -> None:
    """A crawler must not fetch a blacklisted domain in its first moments (the read is asynchronous)."""
    assign = f"/shoal-test/{uuid.uuid4().hex}/"
    zk_client.create(assign + "all", b"blacklist: [banned.example]\n", makepath=True)
    settings = Settings(default_values()).copy_with(ZOOKEEPER_HOSTS=services.zookeeper.address,
                                                     ZOOKEEPER_ASSIGN_PATH=assign)  # fmt: skip
    throttle = ThrottleConfig.from_settings(settings)
    throttle.start("link")
    try:
        assert not throttle.ready  # not yet read: the scheduler does not pop
        wait_until(lambda: throttle.ready, 10, message="the config was never read")
        # ready means the blacklist is in the policy, its entries read as queue domains (issue 30)
        assert url_domain("http://banned.example/") in throttle.policy().blacklist
    finally:
        throttle.stop()


def test_zookeeper_down_delays_the_first_pop_by_its_timeout_only() -> None:
    settings = Settings(default_values()).copy_with(ZOOKEEPER_HOSTS=f"127.0.0.1:{free_port()}", ZOOKEEPER_TIMEOUT=1.0)
    throttle = ThrottleConfig.from_settings(settings)
    began = time.monotonic()
    throttle.start("link")
    try:
        assert not throttle.ready
        wait_until(lambda: throttle.ready, 10, message="never ready without ZooKeeper")
        assert 0.9 <= time.monotonic() - began < 5  # ZOOKEEPER_TIMEOUT, then the settings' throttle
    finally:
        throttle.stop()
