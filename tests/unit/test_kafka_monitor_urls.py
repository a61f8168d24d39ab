"""The fast paths (plain URLs) give exactly what the slow, always-canonicalising paths give."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from w3lib.url import canonicalize_url

from kafka_monitor.urls import domain_and_fingerprint, url_refusal
from utils.config.address_policy import AddressPolicy, fetched_url, literal_address
from utils.config.settings import Settings
from utils.frontier.domains import url_domain
from utils.frontier.fingerprint import PLAIN_URL, canonical_fingerprint, canonical_url, fingerprint

label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
host = st.lists(label, min_size=1, max_size=4).map(".".join)
segment = st.from_regex(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,12}", fullmatch=True)
plain_url = st.builds(
    lambda scheme, h, port, segments, slash: (
        f"{scheme}://{h}{port}/" + "/".join(segments) + (slash if segments else "")
    ),
    st.sampled_from(["http", "https"]),
    host,
    st.sampled_from(["", ":8080", ":80", ":1"]),
    st.lists(segment, max_size=5),
    st.sampled_from(["", "/"]),
)
# URLs the fast path must leave to w3lib: queries, fragments, dot segments, upper case, odd bytes.
other_url = st.one_of(
    st.text(max_size=60),
    st.builds(lambda u, tail: u.rstrip("/") + tail, plain_url,
              st.sampled_from(["?b=1&a=2", "#frag", "/./x", "/../x", "//x", "/a b", "/é", "/%7e", "/.hidden"])),
    plain_url.map(lambda u: u.replace("://", "://WWW.", 1)),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(plain_url)
def test_plain_urls_are_already_canonical(url: str) -> None:
    assert PLAIN_URL.match(url)
    assert canonicalize_url(url) == url


@settings(max_examples=300, deadline=None)
@given(st.one_of(plain_url, other_url), st.sampled_from(["GET", "post"]), st.sampled_from([None, "", "a=1"]))
def test_fast_path_agrees_with_the_shared_functions(url: str, method: str, body: str | None) -> None:
    assert domain_and_fingerprint(url, method, body) == (url_domain(url), canonical_fingerprint(url, method, body))
    assert fingerprint(url, method, body) == canonical_fingerprint(url, method, body)
    assert canonical_url(url) == canonicalize_url(url)  # a page's links are merged by it


@pytest.mark.parametrize("url", ["http://example.com", "http://Example.com/", "http://a.com/?q=1", "http://a.com/x#y"])
def test_urls_needing_canonicalisation_take_the_slow_path(url: str) -> None:
    assert not PLAIN_URL.match(url)


def test_unfiltered_requests_have_no_fingerprint() -> None:
    assert domain_and_fingerprint("http://www.a.com/x", "GET", None, filtered=False) == ("a.com", None)
    assert domain_and_fingerprint("http://www.a.com/?x", "GET", None, filtered=False) == ("a.com", None)


DEFAULT_POLICY = AddressPolicy.from_settings(Settings.load(environ={}))
policies = st.builds(
    lambda schemes, deny_private, longest: AddressPolicy(
        schemes=frozenset(schemes), denied=DEFAULT_POLICY.denied, deny_private=deny_private, max_url_length=longest
    ),
    st.sampled_from([("http", "https"), ("https",)]),
    st.booleans(),
    st.sampled_from([0, 30, 2083]),
)
ip_host = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.sampled_from(["169.254.169.254", "10.0.0.1", "127.0.0.1", "2852039166", "0xa9.0xfe.0xa9.0xfe", "0251.254.1.1"]),
)
ip_url = st.builds(
    lambda scheme, host, port, path: f"{scheme}://{host}{port}/{path}",
    st.sampled_from(["http", "https", "ftp"]),
    ip_host,
    st.sampled_from(["", ":8080", ":70000", ":0"]),
    segment,
)


def parsed_refusal(policy: AddressPolicy, url: str) -> str | None:
    """The policy's verdict the long way: every URL through safe_url_string and urlsplit."""
    if policy.max_url_length and len(url) > policy.max_url_length:
        return "url_length"
    try:
        parts = urlsplit(fetched_url(url))
        host, _ = parts.hostname, parts.port
    except ValueError:
        return "scheme"
    if policy.max_url_length and len(parts.geturl()) > policy.max_url_length:
        return "url_length"
    if parts.scheme not in policy.schemes:
        return "scheme"
    address = literal_address(host or "")
    return None if address is None else policy.address_refusal(address)


@settings(max_examples=400, deadline=None)
@given(policies, st.one_of(plain_url, other_url, ip_url))
def test_url_refusal_fast_path_agrees_with_the_parsed_verdict(policy: AddressPolicy, url: str) -> None:
    assert url_refusal(policy, url) == policy.url_refusal(url) == parsed_refusal(policy, url)
    assert policy.url_refusal(url) == parsed_refusal(policy, url)  # the second time from the host's memory


def test_plain_urls_longer_than_the_limit_are_refused() -> None:
    policy = AddressPolicy(schemes=frozenset({"http"}), denied=(), max_url_length=30)
    url = "http://a.com/" + "x" * 17  # 30 characters
    assert url_refusal(policy, url) is None
    assert url_refusal(policy, url + "y") == policy.url_refusal(url + "y") == "url_length"
