"""Two kafka monitor processes in one group share a 10,000-message burst; one is SIGKILLed mid-batch.

The victim is frozen (SIGSTOP) until it is caught with a batch written to Redis but not committed
(the newest Redis offset mark of one of its partitions is at or past the group's committed offset), then
killed with SIGKILL. The survivor takes its partitions over and replays from the committed offsets;
every request must be queued exactly once: 10,000 distinct URLs in the queues, `enqueued` counters
summing to 10,000, and the replay visible in the survivor's log.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import Component, TestCluster
from tests.support.frontier_keys import in_shard, progress_hash
from tests.support.kafka import GroupOffsets, produce
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, redis_client
from utils.frontier import keys, stored_requests
from utils.frontier.shards import Shards

pytestmark = pytest.mark.integration

MESSAGES = 10_000
PARTITIONS = 6
DOMAINS = [f"burst{i}.com" for i in range(20)]
CRAWLS = [f"crawl{i}" for i in range(5)]
COMMIT_IN_FLIGHT = 0.5  # seconds: longer than the broker takes to apply a commit already sent, even under load


def burst() -> list[dict[str, Any]]:
    return [
        {"url": f"http://{DOMAINS[i % len(DOMAINS)]}/page/{i}", "appid": "burst", "crawlid": CRAWLS[i % len(CRAWLS)]}
        for i in range(MESSAGES)
    ]


def log_records(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def assignment(component: Component) -> set[int]:
    """The partitions a monitor logged as assigned last."""
    assigned = [r for r in log_records(component.log_path) if r.get("message") == "Partitions assigned"]
    return {int(p.rsplit("/", 1)[1]) for p in assigned[-1]["partitions"]} if assigned else set()


def written_not_committed(cluster: TestCluster, partitions: set[int], committed: GroupOffsets) -> bool:
    """Whether one of `partitions` has a batch in Redis whose offsets the group has not committed."""
    r = redis_client(cluster.settings)
    marks = {}
    for partition in partitions:
        key = keys.ingest_marks(cluster.settings.incoming_topic, partition)
        newest = [r.zrange(tag + key, -1, -1, withscores=True) for tag in Shards.for_client(r).tags]  # per shard
        marks[partition] = max((mark[0][1] for mark in newest if mark), default=None)
    offsets = committed({p for p, mark in marks.items() if mark is not None})
    return any(mark is not None and mark >= offsets.get(partition, 0) for partition, mark in marks.items())


def kill_mid_batch(cluster: TestCluster, victim: Component, timeout: float = 60) -> bool:
    """Freeze the victim until it holds a written, uncommitted batch, then SIGKILL it.

    Between looks it runs for 2 to 20 ms in turn: a short slice alone can pass by a window that a
    loaded machine only opens for a few milliseconds of the victim's time."""
    partitions = assignment(victim)
    bootstrap, group = cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.get_str("KAFKA_GROUP")
    committed = GroupOffsets(bootstrap, group, cluster.settings.incoming_topic)
    deadline = time.monotonic() + timeout
    try:
        for slice_ms in itertools.cycle(range(2, 21, 3)):
            if time.monotonic() >= deadline:
                return False
            os.killpg(victim.pid, signal.SIGSTOP)
            if written_not_committed(cluster, partitions, committed):
                time.sleep(COMMIT_IN_FLIGHT)  # a commit the victim sent just before it froze can still land
                if written_not_committed(cluster, partitions, committed):
                    victim.kill()
                    return True
            os.killpg(victim.pid, signal.SIGCONT)
            time.sleep(slice_ms / 1000)
    finally:
        committed.close()
    return False


def enqueued(cluster: TestCluster) -> int:
    r = redis_client(cluster.settings)
    return sum(int(progress_hash(r, "link", "burst", c).get(b"enqueued") or 0) for c in CRAWLS)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("cluster", [{"KAFKA_TOPIC_PARTITIONS": PARTITIONS}], indirect=True)
def test_two_monitors_share_a_burst_and_a_killed_ones_batch_is_replayed_once(cluster: TestCluster) -> None:
    ensure_topics(cluster.settings, [cluster.settings.incoming_topic])
    victim = cluster.start("kafka-monitor", name="km-victim")
    survivor = cluster.start("kafka-monitor", name="km-survivor")
    wait_until(
        lambda: assignment(victim) and assignment(survivor)
        and assignment(victim) | assignment(survivor) == set(range(PARTITIONS))
        and not assignment(victim) & assignment(survivor),
        timeout=60, interval=0.2, message="the two monitors did not split the partitions",
    )  # fmt: skip
    messages = burst()
    producer = threading.Thread(
        target=produce, args=(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, messages)
    )
    producer.start()  # the victim is watched from its first batch on
    try:
        assert kill_mid_batch(cluster, victim), "the victim was never caught with a written, uncommitted batch"
    finally:
        producer.join(60)
    wait_until(lambda: enqueued(cluster) >= MESSAGES, timeout=90, interval=0.2,
               message=f"only {enqueued(cluster)} of {MESSAGES} requests were queued")  # fmt: skip
    topic = cluster.settings.incoming_topic
    bootstrap, group = cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.get_str("KAFKA_GROUP")
    with GroupOffsets(bootstrap, group, topic) as committed:
        wait_until(lambda: committed.total() == MESSAGES, timeout=30)
    assert survivor.alive()

    r = redis_client(cluster.settings)
    assert enqueued(cluster) == MESSAGES  # nothing counted twice
    urls, ids = [], set()
    for domain in DOMAINS:
        for member in r.zrange(in_shard(r, keys.queue("link", domain), domain), 0, -1):
            record = stored_requests.read(r, "link", domain, member)
            assert record is not None
            urls.append(record["url"])
            ids.add(record["request_id"])
    assert len(urls) == MESSAGES  # nothing queued twice
    assert len(ids) == MESSAGES
    assert set(urls) == {m["url"] for m in messages}  # nothing lost
    replayed = [
        rec for rec in log_records(survivor.log_path) if rec.get("message") == "Skipped requests already written"
    ]
    assert sum(rec["replayed"] for rec in replayed) >= 1  # the victim's written batch came round again
