"""A seed's queue domain, dupefilter fingerprint and address-policy verdict, fast for URLs that are
already canonical.

urlsplit costs ~1.5 µs per seed; for plain URLs (utils.fingerprint.PLAIN_URL, which also lets the
fingerprint skip w3lib's canonicalisation) the host is taken from the same regex match. The policy's
own check skips w3lib's safe_url_string and urlsplit for a plain URL too (they were 22 % of the
monitor's ingest time, py-spy, bench/kafka_monitor_ingest.py): it is fetched as it is.
"""

from __future__ import annotations

from utils.config.address_policy import AddressPolicy
from utils.frontier.domains import host_domain, url_domain
from utils.frontier.fingerprint import PLAIN_URL, fingerprint


def domain_and_fingerprint(url: str, method: str, body: str | None, filtered: bool = True) -> tuple[str, bytes | None]:
    """(queue domain, fingerprint or None when not filtered); the domain is '' for a URL without host."""
    plain = PLAIN_URL.match(url)
    domain = host_domain(plain.group("host")) if plain else url_domain(url)
    return domain, (fingerprint(url, method, body) if filtered else None)


def url_refusal(policy: AddressPolicy, url: str) -> str | None:
    """What `policy.url_refusal(url)` says: the policy itself judges a plain URL from the regex match."""
    return policy.url_refusal(url)
