"""Bounds on what a client may send: the body's size (413) and the JSON's nesting (400).

Without them one `POST /feed` of a gigabyte, or of `[[[[...` a million deep, holds the gateway's
memory or its one event loop. The size is checked on the Content-Length header before anything is
read and again on the bytes actually received (chunked bodies have no Content-Length).
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rest.envelope import ApiError, failure

TOO_LARGE = "The request body is too large."
TOO_DEEP = "The JSON payload is nested too deeply."


class BodyLimit:
    """Pure ASGI middleware: a body over `max_bytes` is answered 413 and never held whole."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.max_bytes:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await failure(413, TOO_LARGE, f"at most {self.max_bytes} bytes")(scope, receive, send)
            return
        received = 0

        async def counting() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, TOO_LARGE)  # FastAPI re-raises this one from a body read
            return message

        await self.app(scope, counting, send)


def check_depth(value: Any, max_depth: int) -> None:
    """400 when `value` nests arrays/objects deeper than `max_depth` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > max_depth:
                raise ApiError(400, TOO_DEEP, f"at most {max_depth} levels")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
