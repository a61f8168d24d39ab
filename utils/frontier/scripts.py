"""The Lua scripts of utils/frontier/lua, read once and registered per Redis client."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from utils.frontier.lua_libs import GENERATED, keys_lib, keys_used

INCLUDE = re.compile(r"^--! include (\w+)$", re.MULTILINE)
KEYS_PLACE = "--! keys\n"  # where the lib `keys` goes, once the script's text is whole


@cache
def source(name: str, package: str = "utils.frontier") -> str:
    """The text of `<package>/lua/<name>.lua` (the frontier's scripts unless another concept's),
    its libs pasted in (`pasted`)."""
    return pasted(resources.files(package).joinpath("lua", f"{name}.lua").read_text(), package)


def pasted(text: str, package: str = "utils.frontier") -> str:
    """`text` with each `--! include <lib>` line replaced by `<package>/lua/lib/<lib>.lua` (Redis
    scripts cannot load one another, so shared Lua is pasted in). A lib may include another; each
    is pasted once, where it is first included. The libs `keys` and `constants` are generated from
    Python (utils/frontier/lua_libs.py)."""
    libs = resources.files(package).joinpath("lua", "lib")
    done: set[str] = set()

    def paste(found: re.Match[str]) -> str:
        lib = found.group(1)
        if lib in done:
            return ""
        done.add(lib)
        if lib == "keys":
            return KEYS_PLACE  # filled in last, with the keys the whole script calls
        text = GENERATED[lib]() if lib in GENERATED else libs.joinpath(f"{lib}.lua").read_text()
        return INCLUDE.sub(paste, text)

    script = INCLUDE.sub(paste, text)
    return script.replace(KEYS_PLACE, keys_lib(keys_used(script)), 1)


class Scripts:
    """Registered scripts of one client; each call is EVALSHA with a reload on NOSCRIPT."""

    def __init__(self, client: Any) -> None:
        self.enqueue = client.register_script(source("enqueue"))
        self.pop = client.register_script(source("pop"))
        self.ack = client.register_script(source("ack"))
        self.retry = client.register_script(source("retry"))
        self.release = client.register_script(source("release"))
        self.extend = client.register_script(source("extend"))
        self.fetched = client.register_script(source("fetched"))
        self.throttle_delay = client.register_script(source("throttle_delay"))
        self.ladder_pace = client.register_script(source("ladder_pace"))

    def all(self) -> list[Any]:
        return [
            self.enqueue, self.pop, self.ack, self.retry, self.release, self.extend, self.fetched, self.throttle_delay,
            self.ladder_pace,
        ]

    def load(self, client: Any) -> None:
        """SCRIPT LOAD every script (after a Redis restart emptied the script cache)."""
        for script in self.all():
            script.sha = client.script_load(script.script)


def evalsha_in(pipe: Any, script: Any, route: str, args: list[Any]) -> None:
    """Queue a script on a pipeline as a bare EVALSHA with one key, `route`.

    redis-py's `script(client=pipe)` makes every `execute()` send SCRIPT EXISTS first (one more
    round trip per flush) and is refused by a Redis Cluster pipeline; a plain EVALSHA command is
    routed by its key (a key of the frontier shard the script works on). The caller handles
    NoScriptError (`Scripts.load`).
    """
    pipe.execute_command("EVALSHA", script.sha, 1, route, *args)
