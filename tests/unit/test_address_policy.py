"""The address policy: schemes, URL length, denied networks and the private-range switch."""

from __future__ import annotations

import dataclasses

import pytest

from utils.config.address_policy import AddressPolicy, literal_address
from utils.config.settings import Settings

DEFAULT = AddressPolicy.from_settings(Settings.load(environ={}))
PRODUCTION = AddressPolicy.from_settings(Settings.load(environ={"SHOAL_ADDRESS_DENY_PRIVATE": "true"}))


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "address"),  # cloud metadata
        ("http://[fd00:ec2::254]/latest/", "address"),  # AWS metadata over IPv6
        ("http://[fe80::1]/", "address"),
        ("http://[::ffff:169.254.169.254]/", "address"),  # IPv4-mapped IPv6
        ("http://2852039166/", "address"),  # 169.254.169.254 as one decimal number
        ("http://0xa9.0xfe.0xa9.0xfe/", "address"),  # ... and in hex
        ("file:///etc/passwd", "scheme"),
        ("gopher://127.0.0.1:6379/_FLUSHALL", "scheme"),
        ("ftp://example.com/", "scheme"),
        ("http://example.com/" + "a" * 2100, "url_length"),
        ("http://[::1/", "scheme"),  # not a URL at all
    ],
)
def test_the_defaults_refuse_metadata_link_local_other_schemes_and_long_urls(url: str, reason: str) -> None:
    assert DEFAULT.url_refusal(url) == reason


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/", "https://localhost/", "http://10.1.2.3/", "HTTP://example.com/a", "http://1e100.net/"],
)
def test_the_defaults_allow_loopback_private_and_host_names(url: str) -> None:
    assert DEFAULT.url_refusal(url) is None


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "::1", "fc00::1", "0.0.0.0"]
)
def test_deny_private_refuses_every_address_that_is_not_global(address: str) -> None:
    assert DEFAULT.address_refusal(address) is None
    assert PRODUCTION.address_refusal(address) == "address"


def test_deny_private_keeps_public_addresses_and_host_names() -> None:
    assert PRODUCTION.address_refusal("93.184.216.34") is None
    assert PRODUCTION.url_refusal("https://example.com/") is None  # checked again at connect time
    assert PRODUCTION.url_refusal("http://127.0.0.1/") == "address"


def test_literal_addresses_and_host_names_are_told_apart() -> None:
    assert str(literal_address("127.1")) == "127.0.0.1"
    assert str(literal_address("[::1]")) == "::1"
    assert literal_address("example.com") is None
    assert literal_address("123abc.de") is None


def test_the_crawler_drops_a_response_from_a_refused_address_unless_a_pool_proxy_fetched_it() -> None:
    import ipaddress

    from scrapy import Request
    from scrapy.http import Response

    from crawler.guards import AddressPolicyMiddleware, AddressRefused
    from crawler.proxies import POOL

    middleware = AddressPolicyMiddleware(DEFAULT, robots_maxsize=1000)
    request = Request("http://rebinding.test/", meta={"spiderid": "link"})
    rebound = Response(request.url, request=request, ip_address=ipaddress.ip_address("169.254.169.254"))
    with pytest.raises(AddressRefused):
        middleware.process_response(request, rebound)
    fine = Response(request.url, request=request, ip_address=ipaddress.ip_address("127.0.0.1"))
    assert middleware.process_response(request, fine) is fine
    own = Request("http://rebinding.test/", meta={"proxy": "http://proxy.test:3128"})  # the name rebound (issue 30)
    with pytest.raises(AddressRefused):
        middleware.process_response(own, rebound)
    pooled = Request("http://rebinding.test/", meta={POOL: "http://127.0.0.1:3128"})  # the operator's proxy
    assert middleware.process_response(pooled, rebound) is rebound
    robots = Request("http://rebinding.test/robots.txt", meta={"dont_obey_robotstxt": True})
    middleware.process_request(robots)


def test_a_policy_made_from_another_judges_its_hosts_afresh() -> None:
    lax = AddressPolicy(schemes=frozenset({"http"}), denied=())
    assert lax.url_refusal("http://10.0.0.1/") is None  # remembered by `lax`
    strict = dataclasses.replace(lax, deny_private=True)
    assert strict.url_refusal("http://10.0.0.1/") == "address"
    assert lax.url_refusal("http://10.0.0.1/") is None
