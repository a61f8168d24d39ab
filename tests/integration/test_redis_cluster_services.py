"""The local Redis Cluster launcher: three real redis-server masters joined by `redis-cli --cluster create`."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from tests.support.services import wait_until
from utils.services import redis_ready
from utils.services.process import pid_alive, port_in_use
from utils.services.redis_cluster import SLOTS, RedisClusterHandle, cluster_info, cluster_ok, start_redis_cluster

pytestmark = pytest.mark.integration


def _node(handle: RedisClusterHandle, port: int) -> redis.Redis:
    return redis.Redis(host=handle.host, port=port, socket_timeout=5)


def _slot_owners(client: redis.RedisCluster) -> dict[int, int]:
    """Slots owned per master port, from CLUSTER SLOTS."""
    owned: dict[int, int] = {}
    for (start, end), shard in client.cluster_slots().items():
        assert not shard["replicas"]
        port = int(shard["primary"][1])
        owned[port] = owned.get(port, 0) + end - start + 1
    return owned


def _slots_of(port: int) -> set[int]:
    """The slots a node serves, from its own CLUSTER SLOTS."""
    with redis.Redis(host="127.0.0.1", port=port) as node:
        ranges = node.execute_command("CLUSTER SLOTS")
    return {slot for start, end, primary, *_ in ranges if int(primary[1]) == port for slot in range(start, end + 1)}


def test_three_masters_own_all_slots(redis_cluster: RedisClusterHandle) -> None:
    with redis_cluster.client() as client:
        owned = _slot_owners(client)
        primaries = sorted(node.port for node in client.get_primaries())

    assert sorted(owned) == sorted(redis_cluster.ports) == primaries
    assert sum(owned.values()) == SLOTS
    assert all(count >= SLOTS // 3 - 1 for count in owned.values())  # `--cluster create` splits evenly
    for port in redis_cluster.ports:
        info = cluster_info(redis_cluster.host, port)
        assert (info["cluster_state"], info["cluster_size"], info["cluster_known_nodes"]) == ("ok", "3", "3")


def test_keys_spread_over_every_master_and_read_back(
    redis_cluster: RedisClusterHandle, redis_cluster_client: redis.RedisCluster
) -> None:
    keys = [f"spread:{i}" for i in range(60)]
    for key in keys:
        redis_cluster_client.set(key, key.encode())

    assert [redis_cluster_client.get(key) for key in keys] == [key.encode() for key in keys]
    held = {port: _node(redis_cluster, port).dbsize() for port in redis_cluster.ports}
    assert all(held.values()), held  # each master holds some: the keys really are sharded
    assert sum(held.values()) == len(keys)
    owner = redis_cluster_client.get_node_from_key(keys[0])
    assert owner is not None
    elsewhere = next(port for port in redis_cluster.ports if port != owner.port)
    with pytest.raises(redis.exceptions.MovedError):
        _node(redis_cluster, elsewhere).get(keys[0])


def test_flush_empties_every_master_and_its_scripts(
    redis_cluster: RedisClusterHandle, redis_cluster_client: redis.RedisCluster
) -> None:
    for i in range(30):
        redis_cluster_client.set(f"flush:{i}", 1)
    sha = _node(redis_cluster, redis_cluster.port).script_load("return 1")

    redis_cluster.flush()

    for port in redis_cluster.ports:
        node = _node(redis_cluster, port)
        assert node.dbsize() == 0
        assert node.script_exists(sha) == [False]


def test_a_restarted_node_rejoins_with_its_slots_but_empty(
    redis_cluster: RedisClusterHandle, redis_cluster_client: redis.RedisCluster
) -> None:
    node = redis_cluster.nodes[1]
    key = next(
        k for k in (f"restart:{i}" for i in range(1000)) if redis_cluster_client.keyslot(k) in _slots_of(node.port)
    )
    redis_cluster_client.set(key, b"lost")

    node.restart()

    wait_until(lambda: all(cluster_ok(redis_cluster.host, p) for p in redis_cluster.ports), 20, 0.1)
    assert _node(redis_cluster, node.port).dbsize() == 0
    with redis_cluster.client() as client:
        assert client.get(key) is None
        client.set(key, b"again")
        assert _node(redis_cluster, node.port).get(key) == b"again"


def test_stop_leaves_no_process_port_or_file(tmp_path: Path) -> None:
    run_dir = tmp_path / "cluster"
    handle = start_redis_cluster(run_dir)
    pids = handle.pids
    assert len(pids) == len(handle.ports) == 3
    assert all(redis_ready(handle.host, port) for port in handle.ports)

    handle.stop()

    assert not [pid for pid in pids if pid_alive(pid)]
    assert not [port for port in handle.ports if port_in_use(handle.host, port)]
    assert not run_dir.exists()


def test_fewer_than_three_masters_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 3 masters"):
        start_redis_cluster(tmp_path / "small", masters=2)

    assert not (tmp_path / "small").exists()
