"""The proxy pool against real forward proxies: Debian's tinyproxy on loopback, one process each.

A healthy proxy (BasicAuth), one that refuses every request (403, `FilterDefaultDeny`) and a port
where nothing listens: the crawl of the demo site completes through the healthy one only, the two
others end quarantined, and the credentials of the healthy one appear in no output.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.support.cluster import REPO, TestCluster
from tests.support.kafka import TopicReader, produce
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.demosite.pushback import Pushback, PushbackSite
from utils.frontier import keys, throttle_state
from utils.frontier.ladder import Ladder
from utils.proxies import keys as proxy_keys
from utils.proxies.pool import ProxyPool
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

USER, PASSWORD = "crawler", "s3cret-Pw"
MAXDEPTH = 4
PROXIED = re.compile(r"Request \(file descriptor \d+\): GET (\S+) HTTP/")


class Tinyproxy:
    """One tinyproxy process in the foreground with its own config and log; stopped by pid."""

    def __init__(self, directory: Path, name: str, port: int, *lines: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.port, self.log = port, directory / f"{name}.log"
        config = directory / f"{name}.conf"
        common = ["User root", "Group root", f"Port {port}", "Listen 127.0.0.1", "Timeout 30"]
        config.write_text(
            "\n".join([*common, f'LogFile "{self.log}"', "LogLevel Info", "MaxClients 64", *lines]) + "\n"
        )
        self.process = subprocess.Popen(["tinyproxy", "-d", "-c", str(config)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT)  # fmt: skip
        wait_until(self._listening, timeout=10, message=f"tinyproxy {name} did not listen on {port}")

    def _listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def fetched(self) -> list[str]:
        return PROXIED.findall(self.log.read_text(errors="replace")) if self.log.exists() else []

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def refusing(directory: Path, name: str, port: int) -> Tinyproxy:
    (directory / "empty-filter").parent.mkdir(parents=True, exist_ok=True)
    (directory / "empty-filter").write_text("")
    return Tinyproxy(directory, name, port, f'Filter "{directory / "empty-filter"}"', "FilterDefaultDeny Yes")


@pytest.fixture
def proxies(tmp_path: Path):
    started: list[Tinyproxy] = []

    def start(name: str, port: int, refuse: bool = False) -> Tinyproxy:
        directory = tmp_path / "proxies"
        proxy = (
            refusing(directory, name, port)
            if refuse
            else Tinyproxy(directory, name, port, f"BasicAuth {USER} {PASSWORD}")
        )
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


@pytest.fixture
def cluster_factory(services, tmp_path: Path, request: pytest.FixtureRequest):
    """TestCluster with overrides known only at run time (the proxies' ports); stopped at the end."""
    made: list[TestCluster] = []

    def make(**overrides: object) -> TestCluster:
        made.append(TestCluster(services, tmp_path, **overrides))
        return made[-1]

    yield make
    for cluster in made:
        cluster.stop_all()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print("\n".join(cluster.logs()))


@pytest.fixture
def reader():
    opened: list[TopicReader] = []

    def open_reader(cluster: TestCluster, suffix: str) -> TopicReader:
        opened.append(TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic(suffix)))
        return opened[-1]

    yield open_reader
    for r in opened:
        r.close()


def crawl(cluster: TestCluster, seeds: list[str], crawlid: str, maxdepth: int = MAXDEPTH) -> None:
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link")
    requests = [{"url": s, "appid": "proxyapp", "crawlid": crawlid, "maxdepth": maxdepth, "deny_extensions": []}
                for s in seeds]  # fmt: skip
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, requests)


def all_output(cluster: TestCluster, pages: list[dict], client) -> str:
    """Component logs, page messages, every Redis key and value, `shoal proxies`."""
    logs = "".join(c.log_path.read_text(errors="replace") for c in cluster.components)
    stored = [f"{k}={client.dump(k)!r}" for k in client.scan_iter("*")]
    listing = subprocess.run([".venv/bin/python", "-m", "utils.cli.main", "proxies"], cwd=REPO, env=cluster.env,
                             capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return logs + json.dumps(pages) + "".join(stored) + listing.stdout + listing.stderr


def test_crawl_goes_through_the_healthy_proxy_and_quarantines_the_others(cluster_factory, proxies, reader) -> None:
    site = generate_site(hosts=1, pages_per_host=40, seed=11, base_ip_octet=170, port=free_port())
    good, bad, dead = proxies("good", free_port()), proxies("refusing", free_port(), refuse=True), free_port()
    pool = f"http://{USER}:{PASSWORD}@127.0.0.1:{good.port},http://127.0.0.1:{bad.port},http://127.0.0.1:{dead}"
    cluster = cluster_factory(PROXY_LIST=pool, PROXY_COOLDOWN=600, QUEUE_HITS=1000, QUEUE_WINDOW=1)
    seeds = site.seed_urls()
    expected = site.reachable(seeds, MAXDEPTH, obey_robots=True)
    with SiteServer(site) as server:
        firehose = reader(cluster, "crawled_firehose")
        crawl(cluster, seeds, "px1")
        pages = firehose.wait_for(lambda got: len(got) >= len(expected), timeout=120, message="pages")
        firehose.poll(1.0)
        hits = sum(server.hits.values())

    counts = Counter(page["url"] for page in pages)
    assert set(counts) == set(expected)
    assert max(counts.values()) == 1
    assert all(page["success"] for page in pages)
    assert all(page["attempt"] == 0 for page in pages)  # proxy retries are not RETRY_TIMES attempts
    fetched = good.fetched()
    assert set(expected) <= set(fetched)
    assert len(fetched) == hits  # every request the site saw came through the healthy proxy

    client = redis_client(cluster.settings, decode=True)
    domain = site.hosts[0].split(":")[0]
    assert client.zscore(proxy_keys.proxy_quarantines(f"http://127.0.0.1:{bad.port}"), domain)
    assert client.zscore(proxy_keys.proxy_quarantines(f"http://127.0.0.1:{dead}"), domain)
    assert client.zscore(proxy_keys.proxy_quarantines(f"http://127.0.0.1:{good.port}"), domain) is None
    good_state = client.hgetall(proxy_keys.proxy_state(f"http://127.0.0.1:{good.port}"))
    assert int(good_state.get("bans", 0)) == 0
    wait_until(lambda: int(client.hget(proxy_keys.proxy_state(f"http://127.0.0.1:{good.port}"), "successes") or 0)
               >= len(expected), timeout=10)  # fmt: skip
    cluster.stop_all()  # the last counters are written on close
    rows = {row["proxy"]: row for row in ProxyPool.from_settings(cluster.settings, client).state()}
    bad_row, dead_row = rows[f"http://127.0.0.1:{bad.port}"], rows[f"http://127.0.0.1:{dead}"]
    assert bad_row["bans"] >= 1
    assert dead_row["bans"] >= 1
    assert bad_row["retries"] + dead_row["retries"] == bad_row["bans"] + dead_row["bans"]  # each ban retried once
    assert rows[f"http://127.0.0.1:{good.port}"]["successes"] == hits
    print(f"\nproxy crawl: {len(pages)} pages, site hits {hits}, pool {json.dumps(list(rows.values()))}")
    progress = client.hgetall(keys.crawl_progress("link", "proxyapp", "px1"))
    assert int(progress["crawled"]) == len(expected)
    output = all_output(cluster, pages, client)
    assert PASSWORD not in output
    assert "Y3Jhd2xlcjpzM2NyZXQtUHc" not in output  # base64 of user:password (Proxy-Authorization)


def test_domain_waits_while_every_proxy_is_quarantined_and_resumes(cluster_factory, proxies, reader) -> None:
    """Only a refusing proxy: the domain is held back (never failed, never direct); the proxy keeps
    returning after its shrunk cool-down, and once it answers properly the crawl completes."""
    site = generate_site(hosts=1, pages_per_host=15, seed=5, base_ip_octet=175, port=free_port())
    domain = site.hosts[0].split(":")[0]
    port = free_port()
    bad = proxies("refusing", port, refuse=True)
    label = f"http://127.0.0.1:{port}"
    cluster = cluster_factory(PROXY_LIST=f"http://{USER}:{PASSWORD}@127.0.0.1:{port}", PROXY_COOLDOWN=1,
                              PROXY_COOLDOWN_MAX=2, PROXY_REFRESH=0.2, ROBOTSTXT_OBEY=False,
                              QUEUE_HITS=1000, QUEUE_WINDOW=1)  # fmt: skip
    client = redis_client(cluster.settings, decode=True)
    progress_key = keys.crawl_progress("link", "proxyapp", "px2")
    with SiteServer(site) as server:
        firehose = reader(cluster, "crawled_firehose")
        crawl(cluster, site.seed_urls(), "px2")
        wait_until(lambda: "All proxies quarantined for domain" in cluster.components[1].log_path.read_text(),
                   timeout=60, message="no hold-back log line")  # fmt: skip
        wait_until(lambda: int(client.hget(progress_key, "retrying") or 0) >= 1, timeout=10, message="not retrying")
        held = throttle_state.read(redis_client(cluster.settings), keys.throttle_key(domain, "link"), domain)
        assert held is not None
        assert held.pause > 0
        # the proxy came back after its cool-down and was banned again: it returns to rotation
        wait_until(lambda: int(client.hget(proxy_keys.proxy_domain(label, domain), "strikes") or 0) >= 2, timeout=30)
        firehose.poll(0.5)
        assert firehose.messages == []  # nothing failed
        assert sum(server.hits.values()) == 0  # nothing went direct

        bad.stop()
        good = proxies("good", port)  # the same address now answers properly
        expected = site.reachable(site.seed_urls(), MAXDEPTH, obey_robots=False)
        pages = firehose.wait_for(lambda got: len(got) >= len(expected), timeout=60, message="pages")
        firehose.poll(1.0)
        hits = sum(server.hits.values())
    counts = Counter(page["url"] for page in pages)
    assert set(counts) == set(expected)
    assert max(counts.values()) == 1
    assert all(page["success"] and page["attempt"] == 0 for page in pages)
    assert len(good.fetched()) == hits
    assert PASSWORD not in all_output(cluster, pages, client)


def test_a_pushing_host_steps_to_level_2_and_is_then_fetched_through_the_pool(cluster_factory, proxies, reader) -> None:
    """Issue 33's level 2 in a crawl: a host answering 429 past 4 requests in 2 s is fetched direct
    (LADDER_PROXY_ONLY) until two detections step it to 2 (LADDER_LEVELS [0, 2]); from then on every
    page of it reaches the site through the pool's tinyproxy, slower, and the crawl ends whole."""
    good, host = proxies("good", free_port()), "127.0.0.194"  # no other test crawls this host
    cluster = cluster_factory(
        PROXY_LIST=f"http://{USER}:{PASSWORD}@127.0.0.1:{good.port}", LADDER_PROXY_ONLY=True, LADDER_LEVELS="[0, 2]",
        LADDER_UP_AFTER=2, LADDER_DOWN_AFTER=1000, LADDER_SLOW_DELAY=0.7, LADDER_REFRESH=0.2, ROBOTSTXT_OBEY=False,
        QUEUE_HITS=1000, QUEUE_WINDOW=1, QUEUE_MODERATED=False, RETRY_TIMES=30, RETRY_BACKOFF_BASE=0.2,
        RETRY_BACKOFF_MAX=1.0, RETRY_HTTP_CODES="[429]",
        PROXY_COOLDOWN=0.5, PROXY_COOLDOWN_MAX=1.0,  # the first proxied try may meet the rate window still hot
    )  # fmt: skip
    with PushbackSite({host: Pushback(rate_limit=4, rate_window=2.0, retry_after=1)}, free_port(), pages=8) as site:
        firehose = reader(cluster, "crawled_firehose")
        # deep enough that every page is reached whatever order the 429s' retries put the pages in (a
        # page first found at a deeper depth is not queued again when found higher up)
        crawl(cluster, site.seeds(), "px3", maxdepth=8)
        firehose.wait_for(lambda got: site.urls(host) <= {p["url"] for p in got if p.get("status_code") == 200},
                          timeout=90, message="every page")  # fmt: skip
        hits = list(site.log[host])
    history = Ladder(redis_client(cluster.settings, decode=True), 10, 600).state("link", host)["history"]
    assert [(s["from"], s["to"], s["reason"]) for s in history] == [(0, 2, "status_429")]
    stepped = history[0]["at"] + 1.0  # requests leased before the step finish at level 0 (direct)
    later = {f"http://{host}:{site.port}{hit.path}" for hit in hits if hit.at > stepped}
    proxied = set(good.fetched())
    assert later, "nothing was fetched after the step"
    assert later <= proxied  # each page asked for after the step came through the proxy
    assert any(hit.status == 429 for hit in hits if hit.at <= stepped)
    print(f"\nlevel 2: {len(hits)} hits, {len(later)} pages after the step, {len(proxied)} through the proxy")


def test_crawls_go_through_the_group_their_labels_ask_for_and_an_empty_group_dead_letters(
    cluster_factory, proxies, reader
) -> None:
    """Proxies by kind and place: a German proxy (`region=de,type=residential`) and a plain one. A crawl
    asking for `region=de` reaches its site through the German proxy only, a crawl asking for nothing
    through the plain one only (the default group), and a crawl asking for `region=fr` is dead-lettered
    at once with that reason: its site sees no request at all."""
    german, plain = proxies("german", free_port()), proxies("plain", free_port())
    pool = (f"http://{USER}:{PASSWORD}@127.0.0.1:{german.port}#region=de,type=residential,"
            f"http://{USER}:{PASSWORD}@127.0.0.1:{plain.port}")  # fmt: skip
    cluster = cluster_factory(PROXY_LIST=pool, ROBOTSTXT_OBEY=False, QUEUE_HITS=1000, QUEUE_WINDOW=1)
    sites = {name: generate_site(hosts=1, pages_per_host=12, seed=seed, base_ip_octet=octet, port=free_port())
             for name, seed, octet in (("de", 21, 185), ("plain", 22, 187), ("fr", 23, 189))}  # fmt: skip
    expected = {name: site.reachable(site.seed_urls(), MAXDEPTH, obey_robots=False) for name, site in sites.items()}
    asks = {"de": {"region": "de"}, "plain": None, "fr": {"region": "fr"}}
    client = redis_client(cluster.settings, decode=True)
    with SiteServer(sites["de"]) as de, SiteServer(sites["plain"]) as direct, SiteServer(sites["fr"]) as fr:
        firehose, dead = reader(cluster, "crawled_firehose"), reader(cluster, "dead_letter")
        cluster.start("kafka-monitor")
        cluster.start("crawl", "--spider", "link")
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [
            {"url": url, "appid": "proxyapp", "crawlid": f"labels-{name}", "maxdepth": MAXDEPTH, "deny_extensions": [],
             **({"proxy_labels": asks[name]} if asks[name] else {})}
            for name, site in sites.items() for url in site.seed_urls()])  # fmt: skip
        want = len(expected["de"]) + len(expected["plain"]) + 1  # and the failure page of the `fr` seed
        pages = firehose.wait_for(lambda got: len(got) >= want, timeout=120, message="pages")
        letters = dead.wait_for(lambda got: len(got) >= 1, timeout=30, message="dead letter")
        firehose.poll(1.0)
        hits = {name: sum(server.hits.values()) for name, server in (("de", de), ("plain", direct), ("fr", fr))}
    by_crawl = {name: {p["url"] for p in pages if p["crawlid"] == f"labels-{name}"} for name in sites}
    assert by_crawl["de"] == set(expected["de"])  # each crawl whole
    assert by_crawl["plain"] == set(expected["plain"])
    [failed] = [p for p in pages if p["crawlid"] == "labels-fr"]
    assert (failed["url"], failed["success"]) == (sites["fr"].seed_urls()[0], False)
    assert "no proxy in PROXY_LIST has the labels region=fr" in failed["exception"]
    assert all(p["success"] for p in pages if p is not failed)
    assert set(german.fetched()) == set(expected["de"])  # only the German crawl went through it ...
    assert len(german.fetched()) == hits["de"]  # ... and every request its site saw came through it
    assert set(plain.fetched()) == set(expected["plain"])
    assert len(plain.fetched()) == hits["plain"]
    assert hits["fr"] == 0  # never sent direct
    [letter] = letters
    assert (letter["crawlid"], letter["url"]) == ("labels-fr", sites["fr"].seed_urls()[0])
    assert "no proxy in PROXY_LIST has the labels region=fr" in letter["error"]
    assert letter["attempts"] == 1  # dead at once, not after RETRY_TIMES
    rows = {row["group"]: row for row in ProxyPool.from_settings(cluster.settings, client).state()}
    assert rows["region=de,type=residential"]["bans"] == rows["default"]["bans"] == 0
    assert PASSWORD not in all_output(cluster, pages, client)


def test_the_ladders_proxy_rung_goes_through_the_proxies_the_domains_zookeeper_entry_asks_for(
    cluster_factory, proxies, reader, zk_client
) -> None:
    """With LADDER_PROXY_ONLY a domain pinned at level 2 whose ZooKeeper entry asks for
    `type=residential` reaches its site through the residential proxy only, never the cheap one; a
    domain at level 0 is fetched direct."""
    residential, cheap = proxies("residential", free_port()), proxies("cheap", free_port())
    pool = (f"http://{USER}:{PASSWORD}@127.0.0.1:{cheap.port},"
            f"http://{USER}:{PASSWORD}@127.0.0.1:{residential.port}#type=residential")  # fmt: skip
    cluster = cluster_factory(PROXY_LIST=pool, LADDER_PROXY_ONLY=True, LADDER_SLOW_DELAY=0.05, ROBOTSTXT_OBEY=False,
                              QUEUE_HITS=1000, QUEUE_WINDOW=1)  # fmt: skip
    hard, easy = (generate_site(hosts=1, pages_per_host=12, seed=seed, base_ip_octet=octet, port=free_port())
                  for seed, octet in ((31, 191), (32, 193)))  # fmt: skip
    hard_host = hard.hosts[0].split(":")[0]
    config = {"domains": {hard_host: {"proxy_labels": {"type": "residential"}, "blocks": {"level": 2}}}}
    zk_client.ensure_path(cluster.settings.zookeeper_config_path)
    zk_client.set(cluster.settings.zookeeper_config_path, yaml.safe_dump(config).encode())
    expected = {name: site.reachable(site.seed_urls(), MAXDEPTH, obey_robots=False)
                for name, site in (("hard", hard), ("easy", easy))}  # fmt: skip
    with SiteServer(hard) as hard_server, SiteServer(easy) as easy_server:
        firehose = reader(cluster, "crawled_firehose")
        crawl(cluster, hard.seed_urls() + easy.seed_urls(), "px7")
        pages = firehose.wait_for(lambda got: len(got) >= sum(map(len, expected.values())), timeout=120,
                                  message="pages")  # fmt: skip
        firehose.poll(1.0)
        hits = {name: sum(server.hits.values()) for name, server in (("hard", hard_server), ("easy", easy_server))}
    assert {p["url"] for p in pages} == set(expected["hard"]) | set(expected["easy"])
    assert all(p["success"] for p in pages)
    assert set(residential.fetched()) == set(expected["hard"])
    assert len(residential.fetched()) == hits["hard"]  # every request of the hard site came through it
    assert cheap.fetched() == []
    assert hits["easy"] >= len(expected["easy"])  # fetched direct, at level 0
