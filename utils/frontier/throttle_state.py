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


def read(client: RedisClient, throttle_key: str, domain: str, tag: str = "") -> ThrottleState | None:
    """The state of `domain` under `throttle_key` (`<prefix><domain>`), None when it has none;
    `tag` is the domain's shard hash tag on a Redis Cluster. The client must not decode replies.

    Under a spider's own prefix `<spider>:` a domain in the spider's line carries its state after
    its line member in `<spider>:line_of` (utils/frontier/lua/lib/domain_sets.lua); otherwise, and
    when that carries none, the state is in the prefix's hash."""
    prefix = keys.throttle_prefix(throttle_key, domain)
    value = client.hget(tag + prefix + "line_of", domain)
    member_size = LINE_STAMP + len(domain.encode())
    if value and len(value) > member_size:
        return ThrottleState.decode(value[member_size:])
    packed = client.hget(tag + keys.throttle_states(throttle_key, domain), domain)
    return ThrottleState.decode(packed) if packed else None
