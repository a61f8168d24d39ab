"""The encoders and decoders of utils/frontier/protocol.py against the scripts' opening contracts."""

from __future__ import annotations

import re

from utils.frontier import crawl_request
from utils.frontier.protocol import HEADER_SIZE, ROW_SIZE, LateFetch, PopCall, decode_pop
from utils.frontier.scripts import source
from utils.frontier.types import SLOT_SLACK, ThrottlePolicy


def _argv_count(script: str) -> int:
    return max(int(n) for n in re.findall(r"ARGV\[(\d+)\]", source(script).split("\n\n")[0]))


def test_a_pop_call_fills_every_argv_pop_lua_names_in_order() -> None:
    policy = ThrottlePolicy(key_prefix="link:", hits=3, window=6.0, overrides={"a.com": (1, 2.0)})
    argv = PopCall("link", 20, policy, 300).argv("{0.1}", 7, 15.0, 86400, '{"a":[2,-1]}', '{"a":4}', '{"a":[1,0]}')
    assert len(argv) == _argv_count("pop") == 15
    assert argv[:5] == ["{0.1}link", 7, 15.0, 300, "{0.1}link:"]
    assert argv[10] == 86400
    assert argv[12:] == ['{"a":[2,-1]}', '{"a":4}', '{"a":[1,0]}']  # the apps' quotas, weights, the call's deal
    assert PopCall("link", 20, policy).remaining(5).max_items == 15


def test_a_pop_reply_decodes_its_header_and_drops_rows_whose_crawl_is_gone() -> None:
    record = crawl_request.to_record({"url": "http://a.com/", "appid": "app", "crawlid": "c1", "spiderid": "link"})
    payload = "3" + crawl_request.encode(record).payload  # the enqueue script writes the profile id in front
    member = "0000000000000001" + "1"
    gone = [b"b.com", b"00000000000000021", b"", b"", 0, b""]  # its crawl's payload is gone
    header = [b"250", b"2", b"-1", b'{"app":3}']
    flat = [*header, b"a.com", member.encode(), payload.encode(), b"app\tc1", 1, b'{"maxdepth":2}', *gone]
    assert (len(flat) - HEADER_SIZE) % ROW_SIZE == 0
    popped = decode_pop("link", "", flat)
    assert [(lease.domain, lease.member, lease.record["crawlid"], lease.level) for lease in popped.leases] == [
        ("a.com", f"a.com\t{member}", "c1", 1)
    ]
    assert (popped.leases[0].record["maxdepth"], popped.leases[0].record["url"]) == (2, "http://a.com/")
    assert (popped.retry_after, popped.denied, popped.best_left, popped.app_leases) == (0.25, 2, -1.0, {"app": 3})
    assert decode_pop("link", "", [-1, 0, "", ""]).retry_after is None
    assert decode_pop("link", "", [-1, 0, "", ""]).app_leases is None  # one shard: no counts handed back


def test_a_late_fetch_passes_the_one_slack() -> None:
    argv = LateFetch(100.0, 6.0, "a.com").argv()
    assert len(argv) == _argv_count("fetched")
    assert argv[2] == SLOT_SLACK
