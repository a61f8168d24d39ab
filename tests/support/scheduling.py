"""How `make test` hands tests to its xdist workers: one test at a time, the slow kinds first, and
a module's tests together only when they share a fixture wider than a test.

Each worker starts its own session services, so a test can go to any worker; a module-scoped
fixture (a module's own broker, gateway or secured Redis) would start once per worker that runs
one of its tests, so such a module is one unit of work. The modules with slow tests go out first, then
end-to-end before integration before unit, so the run does not end waiting on one late slow test.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.support.cluster import REPO

# A fixture of the module (or a class of it) that outlives one test: `scope="module"` and the like.
_WIDE_SCOPE = re.compile(r"""scope\s*=\s*["'](?:module|package|class)["']""")
_SLOW = re.compile(r"mark\.slow\b")
# Directories in the order their tests are handed out; anything else goes last.
_FIRST = ("tests/e2e/", "tests/integration/", "tests/docs/")


@cache
def _source(path: str) -> str:
    module = REPO / path
    return module.read_text(errors="replace") if module.is_file() else ""


def shares_a_fixture(path: str) -> bool:
    """Whether the test module at `path` (relative to the repo) declares a fixture wider than a test."""
    return bool(_WIDE_SCOPE.search(_source(path)))


def kind_rank(nodeid: str) -> tuple[bool, int]:
    """Modules that mark a test `slow` first (the unit test that pip-installs Shoal among them),
    then by kind: end-to-end, integration, docs, unit."""
    path = nodeid.split("::", 1)[0]
    kind = next((rank for rank, prefix in enumerate(_FIRST) if path.startswith(prefix)), len(_FIRST))
    return not _SLOW.search(_source(path)), kind


class SharedFixtureScheduling(LoadScopeScheduling):
    """`--dist loadscope` whose scope is a single test, or the module when it shares a fixture."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # keep the order schedule() sets, not biggest-unit first

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if shares_a_fixture(path) else nodeid

    def schedule(self) -> None:
        if self.collection is None:  # the first call: every worker's (identical) collection, reordered alike
            for node, collection in self.registered_collections.items():
                self.registered_collections[node] = sorted(collection, key=kind_rank)
        super().schedule()
