"""Which URLs, proxies and addresses Shoal may fetch: one policy for the kafka monitor, the REST
gateway and the crawler.

A client may ask for any URL and the answer goes to the firehose, so cloud metadata
(169.254.169.254, fd00:ec2::254, 100.100.100.200, ...) and link-local addresses are refused by
default, and ADDRESS_DENY_PRIVATE refuses every address that is not globally routable (private
ranges, loopback, CGNAT, reserved) for production. A URL is checked before it is queued (scheme,
length, a literal IP host); the crawler checks again each address it actually connected to, so a
host name whose DNS answers with an internal address is caught too.

Every check reads the URL Scrapy fetches (`fetched_url`) and its host in one canonical form
(`canonical_host`): the queue domain, the blacklist and the throttle use the same two functions, so
`http://ebay.com\\@allowed.org/`, `http://ｅｂａｙ.com/` and `http://169.254.169.254./` are judged as
what is fetched (issue 30).
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from w3lib.url import safe_url_string

from utils.config.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ProxyKey = tuple[str, int]  # (canonical host, port) of a proxy: what the crawler connects to

# URLs that w3lib's safe_url_string and canonicalize_url both give back unchanged: lower-case host, an
# optional port, a path of unreserved characters, no query, no fragment, no dot segment. Most links are
# like this; for them the policy and the dupefilter skip w3lib (~6 us each per link) and urlsplit
# (tests/unit/test_kafka_monitor_urls.py checks both paths agree on any URL).
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_SEGMENT = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*"
PLAIN_URL = re.compile(
    rf"(?P<scheme>https?)://(?P<host>{_LABEL}(?:\.{_LABEL})*)(?::(?P<port>[1-9][0-9]{{0,4}}))?"
    rf"/(?:{_SEGMENT}(?:/{_SEGMENT})*/?)?\Z"
)
HOSTS_REMEMBERED = 65536  # hosts whose verdict a policy keeps (a crawl's hosts repeat link after link)

ANY_PROXY = "*"  # in PROXY_REQUEST_ALLOWED: a request may name any proxy the address policy allows
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class AddressPolicy:
    """Allowed schemes, refused networks, the private-range switch, the longest URL and the proxies
    a crawl request may name (PROXY_LIST's and PROXY_REQUEST_ALLOWED's; none by default)."""

    schemes: frozenset[str]
    denied: tuple[IPNetwork, ...]
    deny_private: bool = False
    max_url_length: int = 2083
    proxies: frozenset[ProxyKey] = frozenset()
    any_proxy: bool = False
    _hosts: dict[str, str | None] = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> AddressPolicy:
        allowed = [*proxy_list_urls(settings.get_str("PROXY_LIST")), *settings.get_list("PROXY_REQUEST_ALLOWED")]
        return cls(
            schemes=frozenset(s.lower() for s in settings.get_list("URL_ALLOWED_SCHEMES")),
            denied=tuple(ipaddress.ip_network(n, strict=False) for n in settings.get_list("ADDRESS_DENIED_NETWORKS")),
            deny_private=settings.get_bool("ADDRESS_DENY_PRIVATE"),
            max_url_length=settings.get_int("URL_LENGTH_MAX"),
            proxies=frozenset(key for key in map(proxy_key, allowed) if key is not None),
            any_proxy=ANY_PROXY in allowed,
        )

    def url_refusal(self, url: str) -> str | None:
        """Why `url` may not be queued or fetched ('scheme', 'url_length', 'address'), or None.

        Judged as Scrapy fetches it: its scheme, length and host after `fetched_url`."""
        if self.max_url_length and len(url) > self.max_url_length:
            return "url_length"
        plain = PLAIN_URL.match(url)
        if plain is not None and int(plain["port"] or 80) <= 65535:  # as fetched, already
            scheme, host = plain["scheme"], plain["host"]
        else:
            try:
                url = fetched_url(url)
                parts = urlsplit(url)
                scheme, host, _ = parts.scheme, parts.hostname or "", parts.port
            except ValueError:
                return "scheme"  # not a URL Shoal can fetch at all
            if self.max_url_length and len(url) > self.max_url_length:
                return "url_length"
        if scheme not in self.schemes:
            return "scheme"
        return self.host_refusal(host)

    def host_refusal(self, host: str) -> str | None:
        """'address' when `host` names a refused address literally, else None; remembered per host."""
        try:
            return self._hosts[host]
        except KeyError:
            pass
        address = literal_address(host)
        refusal = None if address is None else self.address_refusal(address)
        if len(self._hosts) >= HOSTS_REMEMBERED:
            self._hosts.clear()
        self._hosts[host] = refusal
        return refusal

    def proxy_refusal(self, proxy: str) -> str | None:
        """Why a crawl request may not name `proxy`, or None: 'proxy' when it is not one of PROXY_LIST
        or PROXY_REQUEST_ALLOWED (unless that holds "*"), 'address' when the policy refuses its literal
        address (a name is checked when the crawler resolves it, as any host)."""
        key = proxy_key(proxy)
        if key is None or not (self.any_proxy or key in self.proxies):
            return "proxy"
        address = literal_address(key[0])
        return None if address is None else self.address_refusal(address)

    def address_refusal(self, address: IPAddress | str) -> str | None:
        """'address' when the policy refuses this IP address, or an IPv4 address it carries
        (IPv4-mapped, -compatible and -translated IPv6 count as that IPv4 alone; NAT64, 6to4 and
        Teredo addresses are refused when they or the IPv4 address inside are)."""
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
        candidates: tuple[IPAddress, ...] = (ip,)
        if isinstance(ip, ipaddress.IPv6Address):
            inner = _same_ipv4(ip)
            candidates = (inner,) if inner is not None else (ip, *_tunnelled_ipv4(ip))
        return "address" if any(self._refuses(candidate) for candidate in candidates) else None

    def _refuses(self, ip: IPAddress) -> bool:
        if any(ip.version == net.version and ip in net for net in self.denied):
            return True
        return self.deny_private and not ip.is_global


def fetched_url(url: str) -> str:
    """The URL Scrapy's Request fetches for `url` (w3lib's safe_url_string, as scrapy.Request applies):
    `http://ebay.com\\@allowed.org/` -> `http://ebay.com/@allowed.org/`, full-width letters folded,
    tabs and newlines dropped, the host IDNA-encoded. ValueError when it cannot be fetched (a bad port)."""
    return safe_url_string(url)


def url_host(url: str) -> str:
    """The canonical host of the URL Scrapy fetches for `url` ('' without one); ValueError as `fetched_url`."""
    return canonical_host(urlsplit(fetched_url(url)).hostname or "")


@functools.lru_cache(maxsize=65536)
def canonical_host(host: str) -> str:
    """A host as the policy, the queue domain, the blacklist and the throttle compare it: lower case,
    IDNA-encoded, without brackets or trailing dots, an IP address in its one text form however spelt
    (`0x7f.1`, `2130706433`, `[::ffff:127.0.0.1]` and `127.0.0.1.` are all `127.0.0.1`)."""
    host = host.strip().lower()
    if not host.isascii():
        host = urlsplit(fetched_url(f"http://{host}/")).hostname or host
    host = host.strip("[]").rstrip(".")
    ip = literal_address(host)
    if isinstance(ip, ipaddress.IPv6Address):
        ip = _same_ipv4(ip) or ip
    return host if ip is None else str(ip)


@functools.lru_cache(maxsize=65536)
def literal_address(host: str) -> IPAddress | None:
    """The IP address a host names literally, including the forms getaddrinfo accepts
    ('2852039166', '0xa9.0xfe.0xa9.0xfe', '0251.254.169.254', '169.254.169.254.'), or None for a
    host name. Cached: a crawl's hosts repeat, and this runs for every URL the kafka monitor admits."""
    if host and not host[0].isdigit() and host[0] != "[" and ":" not in host:
        return None  # a name: no literal form starts with a letter (parsing it was ~1/3 of ingest)
    host = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def proxy_key(proxy: str) -> ProxyKey | None:
    """(canonical host, port) of a proxy URL, credentials ignored; None when it names no host and port."""
    try:
        parts = urlsplit(fetched_url(proxy.strip()))
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    host = canonical_host(parts.hostname or "")
    return (host, port) if host and port else None


def proxy_list_entries(value: str) -> list[str]:
    """The entries of PROXY_LIST, each a URL with its labels after `#` (utils/config/proxy_labels.py).

    Comma-separated, or `@path` to a file with one per line, where a comment starts a line or follows
    a space. In the comma-separated form a piece without ':' or '/' after an entry with labels is one
    more label of it: `http://p:8888#region=de,type=residential,http://q:8888` is two entries."""
    value = value.strip()
    if value.startswith("@"):
        items = [_COMMENT.split(line, maxsplit=1)[0] for line in Path(value[1:]).read_text().splitlines()]
    else:
        items = value.split(",")
    entries: list[str] = []
    for item in (item.strip() for item in items):
        if entries and "#" in entries[-1] and _LABEL_PIECE.match(item):
            entries[-1] = f"{entries[-1]},{item}"
        elif item:
            entries.append(item)
    return entries


def proxy_list_urls(value: str) -> list[str]:
    """The URLs of PROXY_LIST, labels left out."""
    return [entry.split("#", 1)[0].strip() for entry in proxy_list_entries(value)]


_COMMENT = re.compile(r"(?:^|\s)#")
_LABEL_PIECE = re.compile(r"^[^:/@#]+$")  # `key=value` (checked by the pool): never a proxy URL, which has a ':'
_COMPATIBLE = ipaddress.ip_network("::/96")  # IPv4-compatible (deprecated, RFC 4291 2.5.5.1)
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (SIIT, RFC 2765)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # well-known NAT64 prefix (RFC 6052)
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # local-use NAT64 prefix (RFC 8215)
# RFC 6052 2.2: where a NAT64 prefix of each length puts the IPv4 address (bits 64-71 are skipped).
_NAT64_LAYOUTS = {48: ((48, 16), (72, 16)), 56: ((56, 8), (72, 24)), 64: ((72, 32),), 96: ((96, 32),)}


def _same_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address is only another spelling of (mapped, compatible, translated)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if (ip in _COMPATIBLE and int(ip) >= 1 << 24) or ip in _TRANSLATED:  # not ::1 and ::, IPv6's own
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _tunnelled_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses a NAT64, 6to4 or Teredo address reaches (Teredo: its server and its client)."""
    found: list[ipaddress.IPv4Address] = []
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    elif ip in _NAT64_LOCAL:
        found.extend(_rfc6052(int(ip), layout) for layout in _NAT64_LAYOUTS.values())
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def _rfc6052(value: int, layout: tuple[tuple[int, int], ...]) -> ipaddress.IPv4Address:
    bits = 0
    for start, length in layout:
        bits = (bits << length) | ((value >> (128 - start - length)) & ((1 << length) - 1))
    return ipaddress.IPv4Address(bits)
