"""Main content, Markdown and metadata of a page (trafilatura + extruct), its SimHash, and the worker
pool that bounds each page in time and memory."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trafilatura

from utils.demosite.duplicates import article
from utils.extract.content import extract
from utils.extract.pool import ExtractionPool, Job, Result
from utils.extract.simhash import as_hex, distance, simhash
from utils.frontier.near_duplicates import band_values

ROOT = Path(__file__).resolve().parents[2]
ARTICLE = " ".join(f"Paragraph {i} of the story tells how the river {i} carried the boats downstream."
                   for i in range(40))
PAGE = f"""<!doctype html><html lang="fr"><head><title>River boats</title>
<link rel="canonical" href="https://news.example/rivers/boats">
<meta name="description" content="How rivers carry boats">
<meta property="og:title" content="River boats"><meta property="article:modified_time" content="2026-03-02">
<script type="application/ld+json">{{"@context": "https://schema.org", "@type": "NewsArticle",
 "headline": "River boats", "author": {{"@type": "Person", "name": "Ada River"}},
 "datePublished": "2026-03-01"}}</script>
</head><body><nav><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a></nav>
<div id="cookie-banner">We use cookies. Accept all cookies?</div>
<article><h1>River boats</h1><h2>Downstream</h2><p>{ARTICLE}</p>
<ul><li>first item of the list</li><li>second item of the list</li></ul>
<table><tr><th>Boat</th><th>Length</th></tr><tr><td>Barge</td><td>40 m</td></tr></table>
<p>See <a href="https://news.example/more">the follow-up story</a> for more.</p></article>
<footer>Copyright 2026 News Example. All rights reserved. Privacy policy. Terms.</footer></body></html>"""


def test_main_text_keeps_the_article_and_drops_navigation_footer_and_banner() -> None:
    fields = extract(PAGE, "https://news.example/rivers/boats?utm_source=x", ("text", "markdown", "metadata"), True)
    text = fields["text"]
    assert "Paragraph 39 of the story" in text
    assert "first item of the list" in text
    assert "Copyright 2026" not in text
    assert "Sport" not in text
    markdown = fields["markdown"]
    assert "## Downstream" in markdown or "# Downstream" in markdown
    assert "- first item of the list" in markdown
    assert "| Barge | 40 m |" in markdown
    assert "[the follow-up story](https://news.example/more)" in markdown
    assert len(fields["simhash"]) == 16


def test_metadata_carries_title_language_dates_authors_canonical_and_structured_data() -> None:
    meta = extract(PAGE, "https://news.example/rivers/boats", ("metadata",), False)["metadata"]
    assert meta["title"] == "River boats"
    assert meta["language"] == "fr"
    assert meta["published"] == "2026-03-01"
    assert meta["modified"] == "2026-03-02"
    assert meta["authors"] == ["Ada River"]
    assert meta["canonical_url"] == "https://news.example/rivers/boats"
    assert meta["description"] == "How rivers carry boats"
    assert meta["json_ld"][0]["@type"] == "NewsArticle"
    assert meta["opengraph"]["og:title"] == "River boats"


def test_text_and_markdown_come_from_one_trafilatura_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real = trafilatura.bare_extraction

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["options"].links)
        return real(*args, **kwargs)

    monkeypatch.setattr(trafilatura, "bare_extraction", counted)
    fields = extract(PAGE, "https://news.example/rivers/boats", ("text", "markdown"), True)
    assert calls == [True]  # one pass, links kept for the Markdown
    assert "[the follow-up story](https://news.example/more)" in fields["markdown"]
    assert "See the follow-up story for more." in fields["text"]  # the link's words, not its target
    assert "https://" not in fields["text"]
    extract(PAGE, "https://news.example/rivers/boats", ("text",), False)
    assert calls == [True, False]


def test_structured_data_is_read_only_for_a_page_that_asks_for_metadata() -> None:
    """extruct is imported with the first page that asks for metadata, never for text and Markdown."""
    code = ("import sys; from utils.extract.content import extract; from tests.unit.test_extract_content import PAGE\n"
            "extract(PAGE, 'https://news.example/', ('text', 'markdown'), True); print('extruct' in sys.modules)\n"
            "extract(PAGE, 'https://news.example/', ('metadata',), False); print('extruct' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["False", "True"]


def test_only_the_kinds_asked_for_are_returned() -> None:
    assert set(extract(PAGE, "https://news.example/", ("text",), False)) == {"text"}
    assert set(extract(PAGE, "https://news.example/", (), True)) == {"simhash"}


def test_a_page_without_content_gives_empty_text_not_an_error() -> None:
    assert extract("", "https://news.example/", ("text", "markdown"), True) == {
        "text": "", "markdown": "", "simhash": as_hex(0)}  # fmt: skip


def test_simhash_is_near_for_small_edits_and_dates_and_far_for_other_texts() -> None:
    text = "\n".join(article(1).paragraphs)  # ~700 words of prose
    base = simhash(text)
    assert simhash(text + "\nUpdated 2026-11-28 at 10:42.") == base  # words with digits and short lines: left out
    words = text.split(" ")
    edited = simhash(" ".join([*words[:100], "lighthouse", *words[101:]]))
    assert distance(base, edited) <= 6
    assert distance(base, simhash("\n".join(article(2).paragraphs))) > 10
    assert band_values(0b1 << 13 | 0b101) == [b"\x00\x05", b"\x00\x01", b"\x00\x00", b"\x00\x00", b"\x00\x00"]


def _run(pool: ExtractionPool, job: Job) -> Result:
    got: list[Result] = []
    done = threading.Event()
    pool.submit(job, lambda result: (got.append(result), done.set()))
    assert done.wait(120)
    return got[0]


@pytest.mark.timeout(300)
def test_pool_answers_a_stalled_or_oversized_page_with_a_failure_and_goes_on() -> None:
    """A page past its time kills its worker; a page past the memory bound fails alone; the next page works."""
    pool = ExtractionPool(workers=1, seconds=20.0, memory=1024 * 1024 * 1024)
    try:
        good = _run(pool, Job(PAGE, "https://news.example/", ("text",), True))
        assert good.error is None
        assert "Paragraph 39" in good.fields["text"]
        pool.seconds = 0.5  # the worker is warm; 20,000 paragraphs (5.8 MB) took 15 s here
        hostile = "<html><body>" + "".join(f"<p>{f'word{i} ' * 30}</p>" for i in range(20_000)) + "</body></html>"
        slow = _run(pool, Job(hostile, "https://hostile.example/", ("text", "markdown"), True))
        assert slow.error == "timeout"
        assert pool.replaced == 1
        pool.seconds = 20.0
        again = _run(pool, Job(PAGE, "https://news.example/", ("text",), False))
        assert again.error is None
        assert "Paragraph 39" in again.fields["text"]
    finally:
        pool.close()


@pytest.mark.timeout(300)
def test_pages_sent_behind_a_page_that_took_its_worker_down_go_to_the_next_worker() -> None:
    """Pages go to a worker ahead of its answers: when the oldest one times out, its worker is replaced
    and the pages sent behind it are extracted by the new one, each answered once."""
    pool = ExtractionPool(workers=1, seconds=20.0, memory=1024 * 1024 * 1024)
    waiting, release = threading.Event(), threading.Event()
    got: dict[str, Result] = {}
    done = threading.Event()
    pages = [Job(PAGE, f"https://news.example/{i}", ("text",), False) for i in range(7)]

    def answered(job: Job) -> Any:
        def record(result: Result) -> None:
            assert job.url not in got
            got[job.url] = result
            pool.seconds = 20.0  # only the first page (sent with the others behind it) times out
            if len(got) == len(pages):
                done.set()

        return record

    try:
        pool.submit(Job(PAGE, "https://news.example/warm", ("text",), False),
                    lambda _: (waiting.set(), release.wait(60)))  # fmt: skip
        for job in pages:  # queued while the dispatcher waits in the warm-up's callback: sent together
            pool.submit(job, answered(job))
        assert waiting.wait(120)
        pool.seconds = 1e-6
        release.set()
        assert done.wait(120)
        assert got[pages[0].url].error == "timeout"
        assert pool.replaced == 1
        assert all(got[job.url].error is None and "Paragraph 39" in got[job.url].fields["text"] for job in pages[1:])
    finally:
        pool.close()


def test_only_the_main_texts_links_are_resolved_against_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative link of the main text comes out absolute in the Markdown, as trafilatura writes it
    given the URL; the links of the boilerplate around it are never resolved (on a realistic page,
    resolving every link of the page cost 6 % of its extraction)."""
    import trafilatura.htmlprocessing

    import utils.extract.content

    resolved: list[str] = []

    def counted(base: str, url: str) -> str:
        resolved.append(url)
        return str(trafilatura.utils.safe_relative_url(base, url))

    monkeypatch.setattr(trafilatura.htmlprocessing, "safe_relative_url", counted)
    monkeypatch.setattr(utils.extract.content, "safe_relative_url", counted, raising=False)
    page = PAGE.replace('href="https://news.example/more"', 'href="../more"').replace(
        "</article>", '</article><div><a href="/related/1">Related one</a> <a href="/related/2">Two</a></div>'
    )
    fields = extract(page, "https://news.example/rivers/boats", ("text", "markdown"), False)
    assert "[the follow-up story](https://news.example/more)" in fields["markdown"]
    assert resolved == ["../more"]  # not the links around the article
    with_metadata = extract(page, "https://news.example/rivers/boats", ("markdown", "metadata"), False)
    assert "[the follow-up story](https://news.example/more)" in with_metadata["markdown"]
