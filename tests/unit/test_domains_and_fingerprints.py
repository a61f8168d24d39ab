"""Queue domains (tldextract offline, IP hosts) and dupefilter fingerprints."""

from __future__ import annotations

import pytest

from utils.frontier.domains import url_domain
from utils.frontier.fingerprint import FINGERPRINT_BYTES, fingerprint


@pytest.mark.parametrize(
    ("url", "domain"),
    [
        ("http://www.cnn.com/a", "cnn.com"),
        ("http://edition.cnn.com/", "cnn.com"),
        ("https://news.bbc.co.uk/x", "bbc.co.uk"),
        ("http://127.0.0.10:8181/page/1.html", "127.0.0.10"),
        ("http://[::1]:80/", "::1"),
        ("http://localhost:8000/", "localhost"),
        ("not a url", ""),
    ],
)
def test_domain_is_the_registered_domain_or_the_ip(url: str, domain: str) -> None:
    assert url_domain(url) == domain


def test_fingerprints_ignore_fragments_and_query_order_but_not_method_or_body() -> None:
    base = fingerprint("http://a.com/p?x=1&y=2")
    assert len(base) == FINGERPRINT_BYTES
    assert fingerprint("http://a.com/p?y=2&x=1#top") == base
    assert fingerprint("http://a.com/p?x=1&y=2", method="POST") != base
    assert fingerprint("http://a.com/p?x=1&y=2", "POST", b"a") != fingerprint(
        "http://a.com/p?x=1&y=2", "POST", b"b"
    )
    assert fingerprint("http://a.com/q") != base
