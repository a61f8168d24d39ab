"""Scale-down that loses nothing (issue 32): of two crawlers of a node `shoal up` runs under
supervisord on the real services, one is stopped mid-crawl (supervisord sends SIGTERM, as the
kubelet does when an autoscaler removes a pod). It stops leasing, gives back the leases it has not
started within 2 s (not after its 2.5 s downloads, the 20 s heartbeat or a lease timeout), flushes
Kafka and exits within 10 s; the other crawler finishes the crawl, and every page arrives once."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter

import pytest
import redis as redis_lib

from tests.e2e.test_scale_out import shoal
from tests.support.cluster import REPO, next_database
from tests.support.kafka import TopicReader, produce
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import LocalServices, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

HOSTS, PAGES = 4, 4
DOWNLOAD = 2.5  # seconds per page: downloads under way outlast the 2 s the leases may take to come back


RETURNS = ("Returned waiting leases on stopping", "Scheduler closed")  # the log lines that count them


def released(log: str) -> list[int]:
    """`released_leases` of each of the crawler's lines that return leases, in order."""
    return [int(e["released_leases"]) for e in map(json.loads, log.splitlines()) if e.get("message") in RETURNS]


def test_under_supervisord_a_stopped_crawler_returns_its_leases_and_loses_nothing(
    services: LocalServices, tmp_path_factory: pytest.TempPathFactory
) -> None:
    run_dir = tmp_path_factory.mktemp("sd")
    prefix = f"down{uuid.uuid4().hex[:8]}"
    database = next_database()
    redis = redis_lib.Redis(host=services.redis.host, port=services.redis.port, db=database)
    redis.flushdb()
    options = [
        "-s", f"REDIS_HOST={services.redis.host}", "-s", f"REDIS_PORT={services.redis.port}",
        "-s", f"REDIS_DB={database}",
        "-s", f"KAFKA_HOSTS={services.broker.address}", "-s", f"ZOOKEEPER_HOSTS={services.zookeeper.address}",
        "-s", f"ZOOKEEPER_ASSIGN_PATH=/shoal-test/{prefix}/", "-s", f"KAFKA_TOPIC_PREFIX={prefix}",
        "-s", f"KAFKA_GROUP={prefix}-group", "-s", f"RUN_DIR={run_dir}", "-s", f"REST_PORT={free_port()}",
        "-s", "QUEUE_HITS=0", "-s", "CONCURRENT_REQUESTS=4", "-s", "SCHEDULER_POP_BATCH=12", "-s", "LEASE_TIMEOUT=600",
        "-s", "SCHEDULER_IDLE_POLL=0.05", "-s", "LOG_JSON=true",
    ]  # fmt: skip
    conf = str(run_dir / "n" / "supervisord.conf")

    def ctl(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(REPO / ".venv/bin/supervisorctl"), "-c", conf, *command], capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip

    site = generate_site(hosts=HOSTS, pages_per_host=PAGES, seed=33, base_ip_octet=170, port=free_port())
    up = shoal(options, "up", "--services", "none", "--node", "n", "--crawlers", "2")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        with SiteServer(site, delay=DOWNLOAD):
            wait_until(lambda: "RUNNING" in ctl("status", "shoal:kafka-monitor").stdout, 60)
            assert ctl("stop", "shoal:crawler-01").returncode == 0  # one crawler leases everything first
            firehose = TopicReader(services.broker.address, f"{prefix}.crawled_firehose")
            urls = [f"http://{host}/page/{i}.html" for host in site.hosts for i in range(PAGES)]
            produce(services.broker.address, f"{prefix}.incoming",
                    [{"url": url, "appid": "scaledown", "crawlid": "sd"} for url in urls])  # fmt: skip
            wait_until(lambda: redis.zcard(keys.inflight("link")) >= 12, timeout=60)
            assert ctl("start", "shoal:crawler-01").returncode == 0
            log = run_dir / "n" / "logs" / "crawler-00.log"
            stop_at = time.monotonic()
            stopping = subprocess.Popen([str(REPO / ".venv/bin/supervisorctl"), "-c", conf, "stop", "shoal:crawler-00"],
                                        stdout=subprocess.DEVNULL)  # fmt: skip
            wait_until(lambda: released(log.read_text(errors="replace")), timeout=10, interval=0.02)
            returned_after = time.monotonic() - stop_at
            assert stopping.wait(15) == 0
            exited_after = time.monotonic() - stop_at

            assert returned_after < 2.0, f"leases back after {returned_after:.2f} s"
            assert sum(released(log.read_text(errors="replace"))) > 0
            assert exited_after < 10.0, f"exit after {exited_after:.2f} s"
            firehose.wait_for(lambda got: {p["url"] for p in got} >= set(urls), timeout=90,
                              message="the other crawler did not finish")  # fmt: skip
            firehose.poll(1.0)
            counts = Counter(page["url"] for page in firehose.messages)
            firehose.close()
    finally:
        shoal(options, "down", "--node", "n")
    assert set(counts) == set(urls)
    assert max(counts.values()) == 1, [url for url, n in counts.items() if n > 1]
    assert redis.zcard(keys.inflight("link")) == 0
    redis.close()
