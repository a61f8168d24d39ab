"""Issue 30 for the redis monitor: whatever a job holds, it alone is answered (when it names a uuid)
and dead-lettered, and the jobs behind it are answered in the same round.

Jobs are added to the real stream on the real Redis (some through `add_job` as the kafka monitor
adds them, some as raw entries no kafka monitor would write: the stream is the monitor's input,
whatever wrote it), and read by an in-process monitor answering on the real broker.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_redis_monitor_helpers import add_jobs, answered, drive, new_uuid, running_monitor
from tests.support.cluster import TestCluster
from utils.config.clients import redis_client
from utils.frontier import keys

pytestmark = pytest.mark.integration

FAST = {"REDIS_MONITOR_RETRY_DELAY": 0.05, "RETRY_FAILURES_MAX": 2}


def good_jobs() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("action", {"action": "info", "appid": "testapp", "spiderid": "link", "uuid": new_uuid()}),
        ("stats", {"appid": "testapp", "uuid": new_uuid(), "stats": "queue"}),
    ]


def hostile_jobs() -> list[tuple[str, dict[str, Any]]]:
    base = {"appid": "testapp", "uuid": ""}
    info = {**base, "action": "info", "spiderid": "link"}
    zk = {**base, "action": "domain-update", "domain": "example.com", "hits": 5, "window": 5}
    return [
        ("action", {**info, "spiderid": ["link"]}),
        ("action", {**info, "spiderid": ".."}),
        ("action", {**info, "action": "stop", "crawlid": 5}),
        ("action", {**info, "crawlid": {"a": [[[]]]}, "colour": "red"}),
        ("action", {**info, "action": "explode"}),
        ("stats", {**base, "stats": {"kind": "all"}}),
        ("zookeeper", {**zk, "domain": 123}),
        ("zookeeper", {**zk, "hits": "many"}),
        ("zookeeper", {**zk, "scale": 2**70}),
        ("unknown-kind", {**base}),
    ]


# Raw entries: request JSON no validated message could hold.
RAW_REQUESTS: dict[str, str | bytes] = {
    "deep": "[" * 500 + "]" * 500,
    "deep-attrs": '{"action": "info", "spiderid": "link", "x": ' + "[" * 500 + "]" * 500 + "}",
    "not-object": '["info"]',
    "not-json": "{nope",
    "infinite": '{"action": "info", "spiderid": "link", "appid": "testapp", "n": 1e400}',
    "surrogate": '{"action": "info", "spiderid": "\\ud800"}',
    "invalid-utf8": b'\xff\xfe{"action": "info", "spiderid": "link"}',  # read as U+FFFD, not a failed XREAD
}


def add_raw(client: Any, kind: str, uuid: str, request: str | bytes) -> None:
    client.xadd(keys.JOBS, {"kind": kind, "uuid": uuid, "appid": "testapp", "request": request, "origin": uuid})


def test_hostile_jobs_are_answered_and_dead_lettered_and_the_jobs_behind_them_answered(
    cluster: TestCluster, topic_reader
) -> None:
    client = redis_client(cluster.settings)
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    before, after = good_jobs(), good_jobs()
    hostile = hostile_jobs()
    for _, request in hostile:
        request["uuid"] = new_uuid()
    for kind, request in before:
        add_jobs(client, kind, [request])
    for kind, request in hostile:
        add_jobs(client, kind, [request])
    raw_uuids = [f"raw-{name}-{new_uuid()}"[:40] for name in RAW_REQUESTS]
    for uuid, request in zip(raw_uuids, RAW_REQUESTS.values(), strict=True):
        add_raw(client, "action", uuid, request)
    client.xadd(keys.JOBS, {"kind": "action", "request": "{}"})  # no uuid: dead-lettered only
    for kind, request in after:
        add_jobs(client, kind, [request])

    good = [r["uuid"] for _, r in before + after]
    bad = [r["uuid"] for _, r in hostile] + raw_uuids
    got, errors = answered(outbound, good), answered(outbound, bad)
    with running_monitor(cluster, **FAST) as monitor:
        assert monitor.run_once(100) == len(good) + len(bad) + 1  # one round takes every job; none stops it
        drive(monitor, got, timeout=20)
        drive(monitor, errors, timeout=20)
    assert all(a.get("action") != "error" for a in got().values())
    assert {a["action"] for a in errors().values()} == {"error"}
    letters = dead.wait_for(lambda got: len(got) >= len(bad) + 1, 20, "a hostile job was not dead-lettered")
    assert len(letters) == len(bad) + 1
    assert not client.xrange(keys.JOBS)  # every job acknowledged: nothing is retried forever
