"""A crawl's `extract` and `near_duplicates` on a real `shoal crawl` process and the demo site.

One host of the demo site also serves a spider trap: `/trap/<n>.html` is one article under new
boilerplate each time, linking to `/trap/<n+1>.html`, 400 deep (utils/demosite/duplicates.py).
A crawl with `"near_duplicates": "skip"` gets the first trap page, flags the next ones as
near-duplicates of it, keeps them out and follows none of their links: the trap ends at once.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import progress, seed
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.demosite import SiteServer, generate_site
from utils.demosite.duplicates import add_trap_pages
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def pages_of(firehose: Any, crawlid: str) -> dict[str, dict[str, Any]]:
    firehose.poll(0.2)
    return {m["url"]: m for m in firehose.messages if isinstance(m, dict) and m.get("crawlid") == crawlid}


@pytest.mark.parametrize("cluster", [{"QUEUE_HITS": 0}], indirect=True)  # unthrottled: about fields, not pacing
def test_pages_carry_text_markdown_metadata_and_a_trap_stops_at_its_first_near_duplicates(
    cluster: TestCluster, topic_reader
) -> None:
    site = generate_site(hosts=1, pages_per_host=5, seed=46, base_ip_octet=146, port=free_port())
    trap = add_trap_pages(site, site.hosts[0])
    firehose = topic_reader("crawled_firehose")
    with SiteServer(site):
        start_crawler(cluster)
        seed(cluster, site.seed_urls()[0], crawlid="plain", extract=["text", "markdown", "metadata"])
        seed(cluster, trap, crawlid="trap", maxdepth=50, near_duplicates="skip", extract=["text"],
             allow_regex=["/trap/"])
        wait_until(lambda: site.seed_urls()[0] in pages_of(firehose, "plain"), timeout=120, interval=0.5,
                   message="the seed page never reached the firehose")  # fmt: skip
        page = pages_of(firehose, "plain")[site.seed_urls()[0]]
        assert page["text"]
        assert page["markdown"]
        assert page["metadata"]["title"]
        assert page["metadata"]["language"] == "en"
        assert "extract_error" not in page
        assert "simhash" not in page  # no near_duplicates asked: no fingerprint either

        wait_until(lambda: progress(cluster, "trap").get("near_duplicates", 0) >= 1, timeout=120, interval=0.5,
                   message="no near-duplicate counted in the trap crawl")  # fmt: skip
        wait_until(lambda: progress(cluster, "trap").get("inflight", 1) == 0
                   and progress(cluster, "trap").get("queued", 1) == 0, timeout=120, interval=0.5)  # fmt: skip
        trapped = pages_of(firehose, "trap")
    first = trapped[trap]
    assert not first.get("near_duplicate")
    assert first["cluster_id"] == first["simhash"]
    flagged = [m for m in trapped.values() if m.get("near_duplicate")]
    assert flagged
    assert all(m["duplicate_of"] == trap for m in flagged)
    assert all(m["kept_out"] for m in flagged)
    assert all(m["cluster_id"] == first["simhash"] for m in flagged)
    assert len(trapped) < 10  # of the 400 trap pages: every flagged page's links were left alone
    assert all("/trap/" in url for url in trapped)
