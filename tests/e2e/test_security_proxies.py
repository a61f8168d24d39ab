"""Issue 30 on a real `shoal crawl` process: a crawl's own proxy is refused at connect time when it
is not one the operator allows or its address is refused, even when the request reached the
frontier unchecked (an older monitor, a hand-written record). 127.30.0.0/16 plays the internal
network here (ADDRESS_DENIED_NETWORKS); nothing leaves 127.0.0.0/8."""

from __future__ import annotations

import time

import pytest

from tests.e2e.test_crawler_helpers import EchoServer, crawler_started, progress, seed
from tests.support.cluster import TestCluster
from tests.support.services import wait_until
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

INTERNAL, CONTROL, STRANGER = "127.30.0.1", "127.24.0.40", "127.24.0.42"
INTERNAL_PORT, CONTROL_PORT, STRANGER_PORT = free_port(INTERNAL), free_port(CONTROL), free_port(STRANGER)
CLUSTER = {
    "QUEUE_HITS": 0,
    "ADDRESS_DENIED_NETWORKS": "169.254.0.0/16,127.30.0.0/16",
    # the internal proxy is even listed: its address is refused all the same
    "PROXY_REQUEST_ALLOWED": f"http://{CONTROL}:{CONTROL_PORT},http://{INTERNAL}:{INTERNAL_PORT}",
}
NUMERIC_INTERNAL = str(int.from_bytes(bytes([127, 30, 0, 1]), "big"))  # 127.30.0.1 as one number


def ended(crawlid: str, cluster: TestCluster) -> bool:
    counts = progress(cluster, crawlid)
    return counts.get("inflight", 1) == 0 and counts.get("queued", 1) == 0


@pytest.mark.parametrize("cluster", [CLUSTER], indirect=True)
def test_a_requests_own_proxy_to_an_internal_or_unlisted_address_is_refused_before_connecting(
    cluster: TestCluster,
) -> None:
    with EchoServer(INTERNAL, INTERNAL_PORT) as internal, EchoServer(CONTROL, CONTROL_PORT) as control, \
            EchoServer(STRANGER, STRANGER_PORT) as stranger:  # fmt: skip
        cluster.start("crawl", "--spider", "link")
        wait_until(lambda: crawler_started(cluster), timeout=30, message="crawler did not start")
        target = "http://127.24.0.41:9"
        seed(cluster, f"{target}/internal", crawlid="internal", proxy=f"http://alice:PROXY-PW@{INTERNAL}:{INTERNAL_PORT}")
        seed(cluster, f"{target}/numeric", crawlid="numeric", proxy=f"http://{NUMERIC_INTERNAL}:{INTERNAL_PORT}")
        seed(cluster, f"{target}/dotted", crawlid="dotted", proxy=f"http://{INTERNAL}.:{INTERNAL_PORT}")
        seed(cluster, f"{target}/stranger", crawlid="stranger", proxy=stranger.base)
        seed(cluster, f"{target}/control", crawlid="control", proxy=control.base)
        wait_until(lambda: control.requests, timeout=30, message="the control proxy was never used")
        for crawlid in ("internal", "numeric", "dotted", "stranger"):
            wait_until(lambda c=crawlid: ended(c, cluster), timeout=30, message=f"{crawlid} never ended")
        time.sleep(2.0)  # the refused seeds had as long as the control one, and more
        assert internal.requests == []  # never connected to
        assert stranger.requests == []
        assert "/control" in control.requests[0]["target"]
    for crawlid in ("internal", "numeric", "dotted", "stranger"):
        assert progress(cluster, crawlid).get("crawled", 0) == 0
    logs = "\n".join(cluster.logs())
    assert "Refused by address policy" in logs
    assert "PROXY-PW" not in logs
