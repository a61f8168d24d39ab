"""Which URLs and addresses Shoal may fetch: one policy for the kafka monitor, the REST gateway and
the crawler.

A client may ask for any URL and the answer goes to the firehose, so cloud metadata
(169.254.169.254, fd00:ec2::254) and link-local addresses are refused by default, and
ADDRESS_DENY_PRIVATE refuses every address that is not globally routable (private ranges, loopback,
CGNAT, reserved) for production. A URL is checked before it is queued (scheme, length, a literal IP
host); the crawler checks again each address it actually connected to, so a host name whose DNS
answers with an internal address is caught too.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from utils.config.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class AddressPolicy:
    """Allowed schemes, refused networks, the private-range switch and the longest URL."""

    schemes: frozenset[str]
    denied: tuple[IPNetwork, ...]
    deny_private: bool = False
    max_url_length: int = 2083

    @classmethod
    def from_settings(cls, settings: Settings) -> AddressPolicy:
        return cls(
            schemes=frozenset(s.lower() for s in settings.get_list("URL_ALLOWED_SCHEMES")),
            denied=tuple(ipaddress.ip_network(n, strict=False) for n in settings.get_list("ADDRESS_DENIED_NETWORKS")),
            deny_private=settings.get_bool("ADDRESS_DENY_PRIVATE"),
            max_url_length=settings.get_int("URL_LENGTH_MAX"),
        )

    def url_refusal(self, url: str) -> str | None:
        """Why `url` may not be queued or fetched ('scheme', 'url_length', 'address'), or None."""
        if self.max_url_length and len(url) > self.max_url_length:
            return "url_length"
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            return "scheme"  # not a URL Shoal can fetch at all
        if parts.scheme.lower() not in self.schemes:
            return "scheme"
        address = literal_address(host or "")
        if address is not None and self.address_refusal(address) is not None:
            return "address"
        return None

    def address_refusal(self, address: IPAddress | str) -> str | None:
        """'address' when the policy refuses this IP address (IPv4-mapped IPv6 counts as IPv4)."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip.version == net.version and ip in net for net in self.denied):
            return "address"
        if self.deny_private and not ip.is_global:
            return "address"
        return None


@functools.lru_cache(maxsize=65536)
def literal_address(host: str) -> IPAddress | None:
    """The IP address a host names literally, including the forms getaddrinfo accepts
    ('2852039166', '0xa9.0xfe.0xa9.0xfe', '0251.254.169.254'), or None for a host name.
    Cached: a crawl's hosts repeat, and this runs for every URL the kafka monitor admits."""
    if host and not host[0].isdigit() and host[0] != "[" and ":" not in host:
        return None  # a name: no literal form starts with a letter (parsing it was ~1/3 of ingest)
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None
