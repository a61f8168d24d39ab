"""The fenced code blocks of the docs site and the README, and which of them a test must run.

A block of a runnable language is run by `test_snippets.py` unless the line right before it (blank
lines aside) is a marker naming the test that covers it instead:
`<!-- not-run: tests/e2e/test_operations.py (why) -->`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
RUNNABLE = {"sh": "shell", "bash": "shell", "shell": "shell", "console": "shell", "python": "python", "py": "python"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*not-run:\s*(?P<test>tests/\S+\.py)(?:::(?P<name>\w+))?\s*\((?P<why>[^)]+)\)\s*-->\s*$")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    covered_by: str | None  # the test a not-run marker names, or None when a test runs it

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def kind(self) -> str | None:
        return RUNNABLE.get(self.lang)


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def parse(page: Path) -> list[Snippet]:
    lines = page.read_text().splitlines()
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, fence, indent = i, match["fence"], len(match["indent"])
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence))
        body = "\n".join(line[indent:] for line in lines[start + 1 : end])
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.match(before)
        covered = None if not marker else marker["test"] + (f"::{marker['name']}" if marker["name"] else "")
        found.append(Snippet(page, start + 1, match["lang"].lower(), body + "\n", covered))
        i = end + 1
    return found


def every_snippet() -> list[Snippet]:
    return [snippet for page in pages() for snippet in parse(page)]


def to_run() -> list[Snippet]:
    return [s for s in every_snippet() if s.kind and s.covered_by is None]
