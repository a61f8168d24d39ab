"""User regexes (a crawl's allow_regex / deny_regex) run on RE2: linear time, whatever the pattern.

Python's `re` backtracks: `(a+)+$` against one long link froze a crawler for 18 s, and the reaper
handed the page to the next crawler. RE2 matches in time linear in the text and refuses the few
constructs it cannot run that way (backreferences, lookaround): such a pattern is refused when the
crawl request arrives, answered and dead-lettered, never found out by a crawler.

A crawl's list is matched as one RE2 set, one pass over a link whatever the number of patterns
(issue 30: 6,000 patterns tried one by one cost 116-158 ms per link once they overflowed the
compile cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is answered to its sender, not logged by RE2 itself
_SET_OPTIONS = re2.Options()
_SET_OPTIONS.log_errors = False
_SET_OPTIONS.max_mem = 64 << 20  # bytes; RE2's default 8 MiB refuses a set of 500 patterns of 256 characters


class InvalidRegex(ValueError):
    """A pattern RE2 cannot compile (syntax error or an unsupported construct), or a list too big for one set."""


@lru_cache(maxsize=4096)
def compile_regex(pattern: str) -> Any:
    """The compiled RE2 pattern; raises InvalidRegex with RE2's reason."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegex(f"{pattern!r}: {reason}") from None


class PatternSet:
    """Whether any of a list of patterns is found in a text, in one RE2 pass (re.search semantics each)."""

    __slots__ = ("_set",)

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self._set = re2.Set.SearchSet(_SET_OPTIONS)
        for pattern in patterns:
            try:
                self._set.Add(pattern)
            except re2.error:
                compile_regex(pattern)  # raises InvalidRegex with RE2's own reason
                raise InvalidRegex(f"{pattern!r}: refused by RE2") from None
        try:
            self._set.Compile()
        except re2.error:
            raise InvalidRegex(f"{len(patterns)} patterns: too large together for one RE2 set") from None

    def search(self, text: str) -> bool:
        return self._set.Match(text) is not None


@lru_cache(maxsize=64)  # a crawler runs a few crawls at once; a set of 1,000 long patterns holds MiBs
def pattern_set(patterns: tuple[str, ...]) -> PatternSet:
    """The compiled set of a crawl's list (cached: every page of a crawl carries the same list)."""
    return PatternSet(patterns)


def check_regexes(patterns: Iterable[str] | None) -> None:
    """Raise InvalidRegex when RE2 refuses a pattern, or the list as one set."""
    patterns = tuple(patterns or ())
    if patterns:
        pattern_set(patterns)


def any_search(patterns: Iterable[str], text: str) -> bool:
    """Whether any of the patterns is found in `text` (Scrapy's LinkExtractor allow/deny semantics)."""
    patterns = tuple(patterns)
    return bool(patterns) and pattern_set(patterns).search(text)
