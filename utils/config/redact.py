"""Credentials never leave a process: proxy URLs are shown without their user:password.

A crawl's own `proxy` may carry credentials (`http://user:pass@host:port`); the request stored in
Redis keeps them (the crawler needs them), but logs, answers and dead-letter records do not.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """`http://user:pass@host:3128` -> `http://***@host:3128`; a URL without credentials unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_request(request: Any) -> Any:
    """A copy of a request dict whose `proxy` has no credentials (anything else as it is)."""
    if isinstance(request, dict) and isinstance(request.get("proxy"), str):
        return {**request, "proxy": redact_url(request["proxy"])}
    return request


_DSN_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)
_DSN_USERINFO = re.compile(r"^(\w+://[^:/@?#]*):[^@/?#]*@")


def redact_dsn(dsn: str) -> str:
    """A libpq DSN without its password, in URL (`user:pass@`, `?password=`) or key=value form."""
    return _DSN_PASSWORD.sub(r"\1***", _DSN_USERINFO.sub(r"\1:***@", dsn))
