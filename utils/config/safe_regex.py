"""User regexes (a crawl's allow_regex / deny_regex) run on RE2: linear time, whatever the pattern.

Python's `re` backtracks: `(a+)+$` against one long link froze a crawler for 18 s, and the reaper
handed the page to the next crawler. RE2 matches in time linear in the text and refuses the few
constructs it cannot run that way (backreferences, lookaround): such a pattern is refused when the
crawl request arrives, answered and dead-lettered, never found out by a crawler.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is answered to its sender, not logged by RE2 itself


class InvalidRegex(ValueError):
    """A pattern RE2 cannot compile (syntax error or an unsupported construct)."""


@lru_cache(maxsize=4096)
def compile_regex(pattern: str) -> Any:
    """The compiled RE2 pattern; raises InvalidRegex with RE2's reason."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegex(f"{pattern!r}: {reason}") from None


def check_regexes(patterns: Iterable[str] | None) -> None:
    """Raise InvalidRegex for the first pattern RE2 refuses."""
    for pattern in patterns or ():
        compile_regex(pattern)


def any_search(patterns: Iterable[str], text: str) -> bool:
    """Whether any of the patterns is found in `text` (Scrapy's LinkExtractor allow/deny semantics)."""
    return any(compile_regex(p).search(text) is not None for p in patterns)
