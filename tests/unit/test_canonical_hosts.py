"""Issue 30: one reading of a URL's host for the address policy, the queue domain, the blacklist and
the throttle, and it is the host Scrapy fetches; a crawl request's own proxy passes the policy too."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.utils.httpobj import urlparse_cached

from crawler.guards import AddressPolicyMiddleware, AddressRefused
from crawler.proxies import POOL
from kafka_monitor.urls import domain_and_fingerprint
from utils.config.address_policy import AddressPolicy, canonical_host, proxy_key
from utils.config.settings import Settings
from utils.frontier.domain_config import DomainConfig
from utils.frontier.domains import host_domain, url_domain


def policy(**environ: str) -> AddressPolicy:
    return AddressPolicy.from_settings(Settings.load(environ={f"SHOAL_{k}": v for k, v in environ.items()}))


DEFAULT = policy()


@pytest.mark.parametrize(
    ("url", "fetched_host"),
    [
        ("http://ebay.com\\@allowed.org/", "ebay.com"),  # urlsplit reads allowed.org; Scrapy fetches ebay.com
        ("http://ｅｂａｙ.com/", "ebay.com"),  # full-width letters
        ("http://EBAY.com./x", "ebay.com"),
        ("http://exa\u00admple.com/", "example.com"),  # a soft hyphen IDNA drops
        ("http://ebay\t.com/", "ebay.com"),
    ],
)
def test_the_queue_domain_is_the_domain_scrapy_fetches(url: str, fetched_host: str) -> None:
    scrapy_host = urlparse_cached(Request(url)).hostname or ""
    assert host_domain(scrapy_host) == host_domain(fetched_host)
    assert url_domain(url) == host_domain(fetched_host)
    assert domain_and_fingerprint(url, "GET", None)[0] == host_domain(fetched_host)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254\\@allowed.org/latest/",  # fetched from 169.254.169.254 (issue 30, finding 6)
        "http://１６９.２５４.１６９.２５４/",  # full-width digits
        "http://169.254.169.254./",  # trailing dot (finding 7)
        "http://169.254.169.254../",
        "http://0xa9.0xfe.0xa9.0xfe./",
    ],
)
def test_the_policy_judges_the_url_scrapy_fetches(url: str) -> None:
    assert DEFAULT.url_refusal(url) == "address"


def test_trailing_dots_are_judged_without_them_everywhere() -> None:
    production = policy(ADDRESS_DENY_PRIVATE="true")
    assert production.url_refusal("http://127.0.0.1./") == "address"
    assert production.url_refusal("http://10.1.2.3./") == "address"
    assert url_domain("http://127.0.0.1./") == url_domain("http://127.0.0.1/") == "127.0.0.1"
    assert canonical_host("169.254.169.254.") == "169.254.169.254"


@pytest.mark.parametrize(
    "address",
    [
        "100.100.100.200",  # Alibaba Cloud metadata
        "168.63.129.16",  # Azure wireserver
        "192.0.0.192",  # Oracle Cloud metadata
        "fd20:ce::254",  # GCP metadata over IPv6
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b::6464:64c8",  # NAT64 of 100.100.100.200
        "64:ff9b:1:a9fe:a9:fe00::",  # local-use NAT64 (/48 layout)
        "::a9fe:a9fe",  # IPv4-compatible
        "::ffff:0:a9fe:a9fe",  # IPv4-translated
        "::ffff:a83f:8110",  # IPv4-mapped 168.63.129.16
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo, client 169.254.169.254
    ],
)
def test_other_metadata_addresses_and_ipv6_forms_of_refused_ipv4_are_refused(address: str) -> None:
    assert DEFAULT.address_refusal(address) == "address"
    host = f"[{address}]" if ":" in address else address
    assert DEFAULT.url_refusal(f"http://{host}/") == "address"


@pytest.mark.parametrize("address", ["::1", "2001:db8::1", "64:ff9b::5db8:d822", "2002:5db8:d822::1", "127.0.0.1"])
def test_ipv6_forms_of_allowed_addresses_stay_allowed(address: str) -> None:
    assert DEFAULT.address_refusal(address) is None


def test_a_private_address_inside_nat64_is_refused_by_the_private_switch() -> None:
    production = policy(ADDRESS_DENY_PRIVATE="true")
    assert production.address_refusal("64:ff9b::a00:1") == "address"  # 10.0.0.1
    assert production.address_refusal("::ffff:93.184.216.34") is None  # mapped public: still allowed


def test_blacklist_entries_are_read_as_queue_domains() -> None:
    config = DomainConfig.parse("blacklist: [EBAY.com, shop.example.com., 0x7f.0.0.1, '[::ffff:127.0.0.2]']")
    assert config.blacklist == {"ebay.com", "example.com", "127.0.0.1", "127.0.0.2"}
    for url in ("http://ebay.com/", "http://www.EBAY.com./", "http://2130706433/", "http://127.0.0.2./"):
        assert url_domain(url) in config.blacklist


def test_a_scalar_blacklist_is_one_entry_not_its_characters() -> None:
    assert DomainConfig.parse("blacklist: ebay.com").blacklist == {"ebay.com"}
    with pytest.raises(ValueError, match="blacklist"):
        DomainConfig.parse("blacklist: {ebay.com: 1}")


def test_throttle_entries_are_read_as_queue_domains_the_stricter_spelling_wins() -> None:
    config = DomainConfig.parse("domains: {EBAY.com.: {hits: 10, window: 60}, ebay.com: {hits: 5, window: 60}}")
    assert list(config.domains) == ["ebay.com"]
    assert config.domains["ebay.com"].hits == 5


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from("aE.9:/@\\[]%ｅ１\t x-"), max_size=30))
def test_the_queue_domain_is_always_the_one_of_the_host_scrapy_fetches(tail: str) -> None:
    url = "http://" + tail
    try:
        scrapy_host = urlparse_cached(Request(url)).hostname or ""
    except ValueError:
        return  # Scrapy cannot fetch it either
    # the canonical spelling of the host Scrapy fetches: `9` is the address 0.0.0.9 to the resolver too
    assert url_domain(url) == host_domain(canonical_host(scrapy_host))


# --- a crawl request's own proxy (finding 1) -----------------------------------------------------


def test_by_default_a_request_may_name_no_proxy_at_all() -> None:
    assert DEFAULT.proxy_refusal("http://169.254.169.254:80") == "proxy"
    assert DEFAULT.proxy_refusal("http://proxy.example.com:3128") == "proxy"


def test_a_request_may_name_a_proxy_of_proxy_list_or_the_allow_list_however_spelt() -> None:
    listed = policy(PROXY_LIST="http://u:p@Proxy.Example.com.:3128,http://127.0.0.1:8080",
                    PROXY_REQUEST_ALLOWED="https://other.example.com")  # fmt: skip
    assert listed.proxy_refusal("http://proxy.example.com:3128") is None
    assert listed.proxy_refusal("http://someone:else@PROXY.example.com:3128") is None
    assert listed.proxy_refusal("http://2130706433:8080") is None  # 127.0.0.1
    assert listed.proxy_refusal("https://other.example.com:443") is None
    assert listed.proxy_refusal("http://proxy.example.com:3129") == "proxy"
    assert listed.proxy_refusal("http://proxy.example.com:99999") == "proxy"


def test_proxy_list_from_a_file_is_read_too(tmp_path) -> None:
    path = tmp_path / "proxies.txt"
    path.write_text("# pool\nhttp://10.0.0.5:3128  # first\n")
    assert policy(PROXY_LIST=f"@{path}").proxy_refusal("http://10.0.0.5:3128") is None


@pytest.mark.parametrize(
    "proxy",
    ["http://169.254.169.254:80", "http://2852039166:80", "http://169.254.169.254.:80", "http://[::ffff:a9fe:a9fe]:80",
     "http://100.100.100.200:80", "http://u:p@0xa9.0xfe.0xa9.0xfe:80"],
)  # fmt: skip
def test_any_proxy_allowed_still_passes_the_address_policy(proxy: str) -> None:
    anyone = policy(PROXY_REQUEST_ALLOWED="*")
    assert anyone.proxy_refusal(proxy) == "address"
    assert anyone.proxy_refusal("http://proxy.example.com:3128") is None
    assert proxy_key(proxy) is not None


def test_a_listed_proxy_in_a_denied_network_is_still_refused() -> None:
    listed = policy(PROXY_REQUEST_ALLOWED="http://169.254.169.254:80")
    assert listed.proxy_refusal("http://169.254.169.254") == "address"


def test_the_crawler_refuses_a_requests_own_proxy_before_the_fetch_and_in_its_children() -> None:
    guard = AddressPolicyMiddleware(policy(PROXY_REQUEST_ALLOWED="*"), robots_maxsize=0)
    seed = Request("http://example.com/", meta={"spiderid": "link", "proxy": "http://169.254.169.254:80"})
    with pytest.raises(AddressRefused, match="address"):
        guard.process_request(seed)
    child = Request("http://example.com/a", meta={"spiderid": "link", "proxy": seed.meta["proxy"], "curdepth": 1})
    with pytest.raises(AddressRefused):
        guard.process_request(child)
    unlisted = AddressPolicyMiddleware(DEFAULT, robots_maxsize=0)
    with pytest.raises(AddressRefused, match="proxy"):
        unlisted.process_request(Request("http://example.com/", meta={"proxy": "http://proxy.example.com:3128"}))
    assert unlisted.process_request(Request("http://example.com/", meta={"proxy": "http://x:1", POOL: "x"})) is None
