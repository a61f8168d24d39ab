"""The gateway's action endpoints answered by the real monitors: info, stats, stop, dead letters.

Real processes (kafka monitor, redis monitor, gateway), no crawler: the fed crawl stays queued, so
stop and replay have something to act on.
"""

from __future__ import annotations

import pytest

from tests.integration.test_rest_helpers import client_of, gateway_cluster, redis_of, success_data
from utils.frontier import dead_letters

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

APP, CRAWL = "answersapp", "ans1"
SEED = {"url": "http://127.0.0.250:9/seed", "appid": APP, "crawlid": CRAWL}


def dead(n: int) -> dict:
    request = {"url": f"http://127.0.0.250:9/dead{n}", "appid": APP, "crawlid": CRAWL, "spiderid": "link",
               "request_id": f"{n:016x}", "priority": 1, "attempt": 3}  # fmt: skip
    return dead_letters.record(request, "HTTP 503", 503, 4, "crawler")


def test_the_monitors_answer_through_the_gateway(services, tmp_path) -> None:
    with gateway_cluster(services, tmp_path, "kafka-monitor", "redis-monitor", WAIT_FOR_RESPONSE_TIME=10.0) as cluster:
        http = client_of(cluster)
        ack = success_data(http.post("/feed", json={**SEED, "uuid": "answers-seed"}))
        assert (ack["action"], ack["status"]) == ("crawl", "queued")

        info = success_data(http.post("/feed", json={"action": "info", "appid": APP, "crawlid": CRAWL,
                                                     "spiderid": "link", "uuid": "answers-info"}))  # fmt: skip
        assert (info["uuid"], info["total_pending"]) == ("answers-info", 1)

        queue = success_data(http.get("/stats/queue"))
        assert (queue["stats"], queue["appid"]) == ("queue", "shoal-rest")
        assert queue["queues"]["total_backlog"] >= 1
        rest = success_data(http.get("/stats/rest"))
        assert http.get("/").json()["my_id"] in [i for ids in rest["nodes"].values() for i in ids]

        r = redis_of(cluster)
        pipe = r.pipeline()
        for n in range(2):
            dead_letters.store(pipe, dead(n))
        pipe.execute()
        assert success_data(http.get(f"/dead-letters/{APP}/{CRAWL}"))["total"] == 2
        replayed = success_data(http.post(f"/dead-letters/{APP}/{CRAWL}/replay"))
        assert (replayed["action"], replayed["total_replayed"]) == ("replay-dead-letters", 2)
        assert success_data(http.get(f"/crawls/{APP}/{CRAWL}"))["queued"] == 3
        assert success_data(http.get(f"/dead-letters/{APP}/{CRAWL}"))["total"] == 0

        pipe = r.pipeline()
        dead_letters.store(pipe, dead(7))
        pipe.execute()
        purged = success_data(http.delete(f"/dead-letters/{APP}/{CRAWL}"))
        assert (purged["action"], purged["total_purged"]) == ("purge-dead-letters", 1)

        stopped = success_data(http.post(f"/crawls/{APP}/{CRAWL}/stop"))
        assert (stopped["action"], stopped["appid"], stopped["crawlid"], stopped["total_purged"]) == (
            "stop", APP, CRAWL, 3,
        )  # fmt: skip
        assert success_data(http.get(f"/crawls/{APP}/{CRAWL}"))["queued"] == 0
