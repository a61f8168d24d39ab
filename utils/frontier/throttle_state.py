"""A domain's throttle state as pop.lua keeps it (utils/frontier/lua/lib/throttle_state.lua), read
back for tests, diagnostics and operators: big-endian doubles, five of them and then the hits."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from utils.config.clients import RedisClient
from utils.frontier import keys

HEAD = struct.Struct(">5d")
LINE_STAMP = 13  # hex digits of a line member's due time, before its domain


@dataclass(frozen=True)
class ThrottleState:
    exp: float  # until when the state matters (unix s); swept after
    slot: float  # the moderated slot: the next hit may come one interval after it
    pause: float  # no hit before this time (Retry-After, Crawl-delay spacing)
    delay_until: float  # until when `delay` holds
    delay: float  # seconds between two hits (robots.txt Crawl-delay)
    hits: tuple[float, ...]  # the latest hits, oldest first

    @classmethod
    def decode(cls, packed: bytes) -> ThrottleState:
        exp, slot, pause, delay_until, delay = HEAD.unpack_from(packed)
        hits = packed[HEAD.size :]
        return cls(exp, slot, pause, delay_until, delay, struct.unpack(f">{len(hits) // 8}d", hits))


def spider_of_prefix(prefix: str) -> str | None:
    """The spider whose own throttle prefix (`keys.spider_throttle_prefix`) `prefix` is, None when it
    is no spider's: a prefix of one segment, `<x>:`, is tied to the spider x (an IP-only prefix names
    a spider with no line, so nothing is carried). lib/domain_sets.lua's ds_spider_of is the same."""
    head = prefix[:-1]
    return head if prefix.endswith(":") and head and ":" not in head else None


def split_line_value(value: bytes, domain: str) -> tuple[bytes, bytes]:
    """A `<spider>:line_of` value of `domain`: its line member, and the state it carries (b'' = none);
    lib/domain_sets.lua's ds_split."""
    size = LINE_STAMP + len(domain.encode())
    return value[:size], value[size:]


def read(client: RedisClient, throttle_key: str, domain: str, tag: str = "") -> ThrottleState | None:
    """The state of `domain` under `throttle_key` (`<prefix><domain>`), None when it has none;
    `tag` is the domain's shard hash tag on a Redis Cluster. The client must not decode replies.

    Where it is follows the one rule of docs/concepts/frontier.md (lib/domain_sets.lua): under a
    spider's own prefix (`spider_of_prefix`) a domain in the spider's line carries it
    after its line member in the spider's `line_of`; otherwise, and when that carries none, it is
    in the prefix's hash."""
    prefix = keys.throttle_prefix(throttle_key, domain)
    spiderid = spider_of_prefix(tag + prefix)
    value = client.hget(keys.line_of(spiderid), domain) if spiderid else None
    carried = split_line_value(value, domain)[1] if value else b""
    if carried:
        return ThrottleState.decode(carried)
    packed = client.hget(tag + keys.throttles(prefix), domain)
    return ThrottleState.decode(packed) if packed else None
