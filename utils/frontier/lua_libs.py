"""The Lua libs generated from Python, so the scripts never spell a key or a shared constant again.

- `keys`: a table `K` with one function per key of `LUA_KEYS`, same name and parameters as in
  utils/frontier/keys.py: `K.queue(sid, d)` is `keys.queue(sid, d)`. Each function's body is read off
  the Python function by calling it with placeholders, so the two cannot disagree
  (tests/integration/test_frontier_lua_libs.py runs both on sample values).
- `constants`: the values Python and Lua must share (`SLOT_SLACK`).

utils/frontier/scripts.py pastes them like the libs of lua/lib/ (`--! include keys`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable

from utils.frontier import keys
from utils.frontier.types import SLOT_SLACK

# The keys the frontier's scripts build; the others are built only in Python.
LUA_KEYS: tuple[Callable[..., str], ...] = (
    keys.queue, keys.fair, keys.crawl_requests, keys.crawl_domains, keys.crawl_profiles, keys.legacy_crawl_requests,
    keys.crawl_progress, keys.crawl_codes, keys.crawl_names,
    keys.heads, keys.line, keys.line_of, keys.classes_ready, keys.classes_snoozed, keys.policy,
    keys.inflight, keys.delayed, keys.dupefilter, keys.bloom_dupefilter, keys.dupefilter_stages,
    keys.dupefilter_stage, keys.domain_pages,
    keys.global_pages, keys.stopped, keys.dead_letters, keys.throttles, keys.spider_throttle_prefix,
    keys.wake, keys.ladder_levels, keys.app_leases, keys.app_pace,
    keys.tier_spill, keys.tier_tails, keys.tier_low, keys.tier_ledger, keys.tier_state,
)  # fmt: skip
_MARK = "\x00"
_PLACEHOLDER = re.compile(f"{_MARK}(\\w+){_MARK}")


def lua_function(key: Callable[..., str]) -> str:
    """`function K.<name>(<params>) return <concatenation> end` for one key function."""
    params = list(inspect.signature(key).parameters)
    template = key(*(f"{_MARK}{p}{_MARK}" for p in params))
    parts = []
    for i, piece in enumerate(_PLACEHOLDER.split(template)):
        if i % 2:
            parts.append(piece)
        elif piece:
            parts.append(_lua_string(piece))
    return f"function K.{key.__name__}({', '.join(params)}) return {' .. '.join(parts)} end"


def _lua_string(text: str) -> str:
    if "'" in text or "\\" in text or "\n" in text:
        raise ValueError(f"a key literal Lua would need escaped: {text!r}")
    return f"'{text}'"


def keys_lib(used: set[str] | None = None) -> str:
    """The text of the lib `keys`: the functions `used` (their names; None = all). A script makes
    its closures anew at each call, so it gets only the keys it calls (~1 us less per pop, measured)."""
    head = "-- lib keys: generated from utils/frontier/keys.py (utils/frontier/lua_libs.py); one function per key.\n"
    wanted = [k for k in LUA_KEYS if used is None or k.__name__ in used]
    return head + "local K = {}\n" + "\n".join(lua_function(k) for k in wanted) + "\n"


def keys_used(text: str) -> set[str]:
    """The key functions a script's text calls (`K.<name>(`)."""
    return set(re.findall(r"\bK\.(\w+)\(", text))


def constants_lib() -> str:
    """The text of the lib `constants`."""
    head = "-- lib constants: generated from utils/frontier/types.py (utils/frontier/lua_libs.py).\n"
    return head + f"local SLOT_SLACK = {SLOT_SLACK!r}\n"


GENERATED: dict[str, Callable[[], str]] = {"keys": keys_lib, "constants": constants_lib}
