"""The Lua scripts of utils/lua, read once and registered per Redis client."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any


@cache
def source(name: str) -> str:
    """The text of `utils/lua/<name>.lua`."""
    return resources.files("utils").joinpath("lua", f"{name}.lua").read_text()


class Scripts:
    """Registered scripts of one client; each call is EVALSHA with a reload on NOSCRIPT."""

    def __init__(self, client: Any) -> None:
        self.enqueue = client.register_script(source("enqueue"))
        self.pop = client.register_script(source("pop"))
        self.ack = client.register_script(source("ack"))
