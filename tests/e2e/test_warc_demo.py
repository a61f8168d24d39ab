"""Issue 35: the demo crawl of a node started the way `make run` starts it (`shoal up --warc`, then `shoal demo`),
archived by the supervised warc program and read back by warcio, every page the demo site served in its records.

The node runs on the session's Redis, ZooKeeper and broker (`--services none`, free ports) instead of
starting its own: the rest is `make run`'s two commands, with `--warc`.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import redis as redis_lib

from tests.e2e.test_scale_out import shoal
from tests.e2e.test_warc_archive import archived, by_url
from tests.support import pywb
from tests.support.cluster import next_database
from tests.support.services import wait_until
from utils.cli.demo import DEMO_MAXDEPTH
from utils.demosite import generate_site
from utils.services import LocalServices, free_port
from warc.records import sha1_digest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_the_demo_crawl_of_a_node_started_with_warc_is_archived_and_read_back_by_warcio(
    services: LocalServices, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    prefix = f"wd{uuid.uuid4().hex[:8]}"
    database = next_database()
    redis_lib.Redis(host=services.redis.host, port=services.redis.port, db=database).flushdb()
    options = [
        "-s", f"REDIS_HOST={services.redis.host}", "-s", f"REDIS_PORT={services.redis.port}",
        "-s", f"REDIS_DB={database}",
        "-s", f"KAFKA_HOSTS={services.broker.address}", "-s", f"ZOOKEEPER_HOSTS={services.zookeeper.address}",
        "-s", f"ZOOKEEPER_ASSIGN_PATH=/shoal-test/{prefix}/", "-s", f"KAFKA_TOPIC_PREFIX={prefix}",
        "-s", f"KAFKA_GROUP={prefix}-group", "-s", f"WARC_GROUP={prefix}-warc", "-s", f"RUN_DIR={run_dir}",
        "-s", f"REST_PORT={free_port()}", "-s", f"SINK_POSTGRES_DSN=postgresql://shoal@127.0.0.1:{free_port()}/shoal",
        "-s", "WARC_MAX_AGE=1", "-s", "LOG_JSON=true",
    ]  # fmt: skip
    port = free_port()
    up = shoal(options, "up", "--services", "none", "--node", "n", "--crawlers", "1", "--warc")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        demo = shoal(options, "demo", "--port", str(port), "--hosts", "1", "--pages", "12", "--timeout", "120")
        assert demo.returncode == 0, demo.stdout + demo.stderr
        crawlid = re.search(r"feeding crawl (demo-[0-9a-f]+)", demo.stdout)
        assert crawlid, demo.stdout
        site = generate_site(hosts=1, pages_per_host=12, port=port)  # the site `shoal demo` served
        expected = set(site.reachable(site.seed_urls(), DEMO_MAXDEPTH, obey_robots=True))
        directory = run_dir / "warc"  # WARC_DIR's default
        wait_until(lambda: set(by_url(archived(directory), "response")) >= expected, 60,
                   message="the demo's pages did not all reach a closed WARC file")  # fmt: skip
    finally:
        down = shoal(options, "down", "--node", "n")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not list(directory.glob("*.open"))  # SIGTERM closed the open file
    records = archived(directory)  # every file read whole by warcio, digests checked
    assert {r["headers"]["WARC-Type"] for r in records} >= {"warcinfo", "response", "request", "metadata"}
    responses, requests = by_url(records, "response"), by_url(records, "request")
    for url in expected:
        served = site.pages[url]
        (response,) = responses[url]
        assert response["status"] == str(served.status), url
        assert response["payload"] == served.body, url
        assert response["headers"]["WARC-Payload-Digest"] == sha1_digest(served.body), url
        assert requests[url], url
    for path in directory.glob("*.warc.gz"):
        assert path.with_name(path.name + ".cdxj").stat().st_size > 0
    html = sorted(url for url in expected if site.pages[url].content_type.startswith("text/html"))[:3]
    assert len(html) == 3
    with pywb.replaying(tmp_path / "replay", sorted(directory.glob("*.warc.gz"))) as replay:
        for url in html:  # pywb replays three of the demo's pages with what the site served
            answer = replay(url, responses[url][0]["headers"]["WARC-Date"])
            assert answer.status_code == 200, url
            assert answer.content == site.pages[url].body, url
