"""The redis monitor with the disk tier: its mover fills PostgreSQL, info counts both tiers, stop empties both."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.test_redis_monitor_helpers import add_jobs, answered, drive, new_uuid, running_monitor
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import crawl_counters, shard_sum
from tests.support.postgres import Postgres
from tests.support.tier import tier_dsn
from utils.config.clients import redis_client
from utils.frontier import Frontier, NewRequest, crawl_request, keys

pytestmark = pytest.mark.integration


def test_the_monitor_moves_tails_to_disk_and_answers_info_and_stop_over_both_tiers(
    cluster: TestCluster, postgres: Postgres, topic_reader
) -> None:
    tier = {"FRONTIER_DISK_TIER_DSN": tier_dsn(postgres), "FRONTIER_WINDOW": 5,
            "FRONTIER_DISK_TIER_TABLE": f"tail_{uuid.uuid4().hex[:10]}", "FRONTIER_DISK_TIER_INTERVAL": 0.05,
            "REDIS_MONITOR_RETRY_DELAY": 0.05}  # fmt: skip
    settings = cluster.settings.copy_with(**tier)
    r = redis_client(settings, decode=True)
    frontier = Frontier.from_settings(settings, redis_client(settings))
    requests = []
    for i in range(30):
        record = crawl_request.to_record({"url": f"http://a.com/{i}", "appid": "testapp", "crawlid": "T1",
                                          "spiderid": "link", "priority": 5})  # fmt: skip
        requests.append(NewRequest("link", "a.com", 5, "testapp", "T1", seed=True,
                                   **crawl_request.encode(record)._asdict()))  # fmt: skip
    assert set(frontier.enqueue(requests)) == {"queued"}
    assert shard_sum(r, "zcard", keys.queue("link", "a.com")) == 5
    outbound = topic_reader("outbound_firehose")
    info = {"action": "info", "appid": "testapp", "crawlid": "T1", "spiderid": "link", "uuid": new_uuid()}
    stop = {"action": "stop", "appid": "testapp", "crawlid": "T1", "spiderid": "link", "uuid": new_uuid()}
    with running_monitor(cluster, **tier) as monitor:
        drive(monitor, lambda: shard_sum(r, "xlen", keys.tier_spill("link")) == 0)  # the mover drained it
        add_jobs(r, "action", [info])
        got = drive(monitor, answered(outbound, [info["uuid"]]))[info["uuid"]]
        assert (got["total_pending"], got["domains"]["a.com"]["total"]) == (30, 30)
        add_jobs(r, "action", [stop])
        got = drive(monitor, answered(outbound, [stop["uuid"]]))[stop["uuid"]]
    assert got["total_purged"] == 30
    counters = crawl_counters(r, "link", "testapp", "T1")
    assert (counters["queued"], counters["dropped_stopped"]) == (0, 30)
    assert shard_sum(r, "hlen", keys.tier_tails("link")) == 0
