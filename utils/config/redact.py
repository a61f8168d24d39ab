"""Credentials never leave a process: proxy URLs are shown without their user:password.

A crawl's own `proxy` may carry credentials (`http://user:pass@host:port`); the request stored in
Redis keeps them (the crawler needs them), but logs, answers and dead-letter records do not.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """`http://user:pass@host:3128` -> `http://***@host:3128`; a URL without credentials unchanged.

    Never raises: a URL urlsplit cannot read, or whose port is no number (`http://u:p@h:x`, port
    99999; `.port` raises ValueError, issue 30), is shown as `***@` and its host only, or `***`."""
    try:
        parts = urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.hostname or ""
    except ValueError:
        return HIDDEN
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return urlunsplit((parts.scheme, f"***@{host}{port}", parts.path, parts.query, parts.fragment))


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


# Header and field names whose values are credentials (compared lower-case).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"})
SECRET_FIELDS = frozenset({"cookie", "password", "token", "access_token", "api_key", "secret"})
HIDDEN = "***"


SHOWN_DEPTH = 32  # levels of a message shown; deeper parts are hidden (a copy that recursed overflowed, issue 30)


def redact_secrets(value: Any, _depth: int = 0) -> Any:
    """A copy of a message for showing (logs, answers, dead letters, GET /dead-letters) without credentials:
    proxy URLs' user:password, `cookie` and token fields, and the values of Authorization, Cookie,
    Proxy-Authorization, Set-Cookie and X-API-Key headers (in `headers`, `request_headers`,
    `response_headers`). What is stored for the crawler to use keeps them. Containers nested deeper
    than SHOWN_DEPTH are shown as `***`, so any depth of input is safe to show."""
    if not isinstance(value, list | dict):
        return value
    if _depth >= SHOWN_DEPTH:
        return HIDDEN
    if isinstance(value, list):
        return [redact_secrets(item, _depth + 1) for item in value]
    shown: dict[Any, Any] = {}
    for key, item in value.items():
        name = key.lower() if isinstance(key, str) else key
        if name == "proxy" and isinstance(item, str):
            shown[key] = redact_url(item)
        elif name in SECRET_FIELDS and item is not None:
            shown[key] = HIDDEN
        elif isinstance(name, str) and name.endswith("headers") and isinstance(item, dict):
            shown[key] = {h: HIDDEN if str(h).lower() in SECRET_HEADERS else _flat(v) for h, v in item.items()}
        else:
            shown[key] = redact_secrets(item, _depth + 1)
    return shown


def _flat(value: Any) -> Any:
    """A header's value as shown: a scalar as it is, a container hidden (headers are strings)."""
    return HIDDEN if isinstance(value, list | dict) else value
