"""The Lua libs generated from Python (utils/frontier/lua_libs.py) and the throttle state's locator
agree with their Python side, run on a real Redis."""

from __future__ import annotations

import inspect
import re
from importlib import resources

import pytest
import redis

from utils.frontier import keys
from utils.frontier.lua_libs import LUA_KEYS
from utils.frontier.scripts import pasted
from utils.frontier.throttle_state import spider_of_prefix
from utils.frontier.types import SLOT_SLACK

pytestmark = pytest.mark.integration

SAMPLES = {"spiderid": "{0.3}link", "domain": "a.example.com", "appid": "app", "crawlid": "c-1", "prefix": "link:",
           "stage": "3"}
PREFIXES = ["", "link:", "{0.3}link:", "1.2.3.4:", "link:1.2.3.4:", "2001:db8::1:", "link:2001:db8::1:"]


def run_lua(client: redis.Redis, libs: list[str], body: str, *argv: str) -> object:
    """EVAL `body` after the libs it needs, pasted as a script of the frontier gets them."""
    includes = "".join(f"--! include {lib}\n" for lib in libs)
    script = client.register_script(pasted(includes + body))
    return script(keys=["shoal:frontier"], args=list(argv))


def test_every_lua_key_is_the_python_key(redis_db: redis.Redis) -> None:
    for key in LUA_KEYS:
        params = list(inspect.signature(key).parameters)
        argv = [SAMPLES[p] for p in params]
        call = f"return K.{key.__name__}({', '.join(f'ARGV[{i + 1}]' for i in range(len(params)))})"
        assert run_lua(redis_db, ["keys"], call, *argv) == key(*argv).encode(), key.__name__


def test_the_lua_slack_is_the_python_slack(redis_db: redis.Redis) -> None:
    assert run_lua(redis_db, ["constants"], "return tostring(SLOT_SLACK)") == str(SLOT_SLACK).encode()


def test_one_rule_tells_the_spider_of_a_throttle_prefix_in_python_and_lua(redis_db: redis.Redis) -> None:
    for prefix in PREFIXES:
        lua = run_lua(redis_db, ["domain_sets"], "return ds_spider_of(ARGV[1]) or ''", prefix)
        assert lua.decode() == (spider_of_prefix(prefix) or ""), prefix
    assert spider_of_prefix(keys.spider_throttle_prefix("link")) == "link"
def test_no_script_spells_a_key_that_the_key_helper_names() -> None:
    """':queue', ':requests', ':progress' and the spider's own sets come from K, not by hand."""
    spelled = re.compile(r"'(:queue|:requests|:progress|:inflight|:delayed|:heads|:line|:line_of|:policy|"
                         r":classes_ready|:classes_snoozed|:crawl_names|:crawl:)'")  # fmt: skip
    lua = resources.files("utils.frontier").joinpath("lua")
    scripts = [*lua.iterdir(), *lua.joinpath("lib").iterdir()]
    found = {s.name: spelled.findall(s.read_text()) for s in scripts if s.name.endswith(".lua")}
    assert {name: hits for name, hits in found.items() if hits} == {}
