"""What `mkdocs build --strict` (make docs) does not check: external links' syntax (never fetched),
the README's links into the site, and decision records listed on their index."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from tests.docs.snippets import DOCS, REPO, pages

LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def links(text: str) -> list[str]:
    """Markdown link targets outside fenced code blocks and inline code."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [m["target"] for m in LINK.finditer(text)]


def test_external_links_are_well_formed() -> None:
    for page in pages():
        for target in links(page.read_text()):
            parts = urlsplit(target)
            if parts.scheme:
                assert parts.scheme in {"http", "https", "mailto"}, f"{page}: {target}"
                assert parts.scheme == "mailto" or (parts.netloc and "." in parts.netloc), f"{page}: {target}"
                assert " " not in target, f"{page}: {target}"


def test_readme_links_reach_pages_and_their_anchors() -> None:
    for target in links((REPO / "README.md").read_text()):
        if urlsplit(target).scheme:
            continue
        path, _, anchor = target.partition("#")
        page = REPO / path
        assert page.is_file(), f"README links to {target}, which does not exist"
        if anchor:
            headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                        for h in re.findall(r"^#+ (.+)$", page.read_text(), re.M)}  # fmt: skip
            assert anchor in headings, f"README links to {target}: no such heading"


def test_every_decision_record_is_listed_on_the_index() -> None:
    index = (DOCS / "decisions" / "index.md").read_text()
    records = sorted(p.name for p in (DOCS / "decisions").glob("*.md") if p.name != "index.md")
    assert records, "decision records live in docs/decisions/<slug>.md"
    assert [name for name in records if f"]({name})" not in index] == []


def paragraphs(text: str) -> list[str]:
    """Prose paragraphs of a page (code blocks and tables left out), whitespace normalized."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    blocks = (" ".join(block.split()) for block in re.split(r"\n\s*\n", text))
    return [block for block in blocks if len(block) >= 160 and not block.startswith(("|", "<!--"))]


def test_no_paragraph_is_written_twice() -> None:
    seen: dict[str, str] = {}
    twice = []
    for page in pages():
        for paragraph in paragraphs(page.read_text()):
            if paragraph in seen:
                twice.append(f"{page.relative_to(REPO)} repeats {seen[paragraph]}: {paragraph[:80]}...")
            seen.setdefault(paragraph, str(page.relative_to(REPO)))
    assert twice == []
