"""The proxy pool's shared state on a real Redis: counters, quarantines, doubling, global bans."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest
import redis

from tests.support.cluster import REPO
from tests.support.frontier_keys import every_key
from utils.proxies import keys as proxy_keys
from utils.proxies.pool import ProxyPool, parse_proxy_list

pytestmark = pytest.mark.integration
PROXIES = "http://user:s3cret@127.0.0.1:1,http://127.0.0.1:2"


def make_pool(client: redis.Redis, cooldown: float = 100.0, cap: float = 350.0, global_domains: int = 2) -> ProxyPool:
    return ProxyPool(client, parse_proxy_list(PROXIES), cooldown, cap, global_domains, ttl=3600)


def test_ban_quarantines_for_the_domain_and_doubles_up_to_the_cap(redis_db: redis.Redis) -> None:
    pool = make_pool(redis_db, global_domains=99)
    now = time.time()
    first = pool.ban("http://127.0.0.1:1", "a.test")
    assert first.everywhere == 0
    assert first.domain_until == pytest.approx(now + 100, abs=5)
    again = pool.ban("http://127.0.0.1:1", "a.test")  # still quarantined: counted, not a new strike
    assert again.domain_until == first.domain_until
    q = pool.quarantines("a.test")
    assert q == {"http://127.0.0.1:1": pytest.approx(first.domain_until, abs=0.01), "http://127.0.0.1:2": 0.0}
    assert pool.quarantines("b.test") == {"http://127.0.0.1:1": 0.0, "http://127.0.0.1:2": 0.0}

    per_domain = proxy_keys.proxy_domain("http://127.0.0.1:1", "a.test")
    lengths = []
    for _ in range(4):  # expire the quarantine by hand, then ban again: 200, 350 (cap), 350
        redis_db.hset(per_domain, "until", "0")
        lengths.append(pool.ban("http://127.0.0.1:1", "a.test").domain_until - time.time())
    assert [round(x / 50) * 50 for x in lengths] == [200, 350, 350, 350]
    assert int(redis_db.hget(per_domain, "bans")) == 6
    assert 0 < redis_db.ttl(per_domain) <= 3600


def test_bans_by_enough_domains_quarantine_everywhere(redis_db: redis.Redis) -> None:
    pool = make_pool(redis_db, global_domains=2)
    assert pool.ban("http://127.0.0.1:2", "a.test").everywhere == 0
    ban = pool.ban("http://127.0.0.1:2", "b.test")
    assert ban.everywhere > time.time()
    assert pool.quarantines("c.test")["http://127.0.0.1:2"] == pytest.approx(ban.everywhere, abs=0.01)
    assert pool.quarantines("c.test")["http://127.0.0.1:1"] == 0.0


def test_counters_and_state_never_show_credentials(redis_db: redis.Redis) -> None:
    pool = make_pool(redis_db)
    pool.count(
        Counter({("http://127.0.0.1:1", "a.test", "requests"): 3, ("http://127.0.0.1:1", "a.test", "successes"): 2})
    )
    pool.ban("http://127.0.0.1:1", "a.test")
    rows = {row["proxy"]: row for row in pool.state()}
    assert rows["http://127.0.0.1:1"]["requests"] == 3
    assert rows["http://127.0.0.1:1"]["successes"] == 2
    assert rows["http://127.0.0.1:1"]["bans"] == 1
    assert set(rows["http://127.0.0.1:1"]["quarantined_domains"]) == {"a.test"}
    assert rows["http://127.0.0.1:2"]["bans"] == 0
    assert all(b"s3cret" not in key and b"user" not in key for key in every_key(redis_db))


def test_shoal_proxies_lists_the_pool(redis_db: redis.Redis, services, backend_settings: dict[str, str]) -> None:
    pool = make_pool(redis_db)
    pool.ban("http://127.0.0.1:1", "a.test")
    where = backend_settings or {
        "REDIS_HOST": services.redis.host, "REDIS_PORT": str(services.redis.port),
        "REDIS_DB": str(redis_db.connection_pool.connection_kwargs["db"]),
    }  # fmt: skip
    env = {**{f"SHOAL_{k}": v for k, v in where.items()}, "SHOAL_PROXY_LIST": PROXIES, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "utils.cli.main", "proxies"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    lines = out.stdout.splitlines()
    assert len(lines) == 3  # each proxy, then each group of labels
    assert lines[0].startswith(
        "http://127.0.0.1:1  requests=0 successes=0 bans=1 retries=0  healthy  quarantined for: a.test"
    )
    assert lines[0].endswith("  group default")
    assert lines[2] == "group default  2/2 healthy  1 domain quarantine(s)  requests=0 successes=0 bans=1 retries=0"
    assert "s3cret" not in out.stdout + out.stderr
    assert json.dumps(pool.state()).count("s3cret") == 0
