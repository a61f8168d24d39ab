"""Near-duplicate pages whose truth is known: the same article under different boilerplate, and other
articles under the same boilerplate (the near-duplicate benchmark and the spider-trap demo).

An article is a title and paragraphs of the demo vocabulary. `render` puts it in a page with a
boilerplate drawn from its own seed: navigation, a cookie banner, a "most read" sidebar, ads
between the paragraphs (some as paragraphs of the text, as "Advertisement" and "Read more" lines
are on many sites), a published/updated date line and a footer; some copies have a word edited or
a correction note appended. `variants` gives one article
under several boilerplates and URLs with tracking parameters; `twin` renders another article under
exactly the boilerplate of a given variant. `add_trap_pages` adds a host's spider trap: `/trap/<n>`
serves one article under ever-changing boilerplate and links to `/trap/<n+1>`, endlessly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from html import escape

from utils.demosite.generator import HTML_TYPE, TITLE_WORDS, WORDS, Page, Site

TRAP_PAGES = 400  # trap pages a host serves (a crawler that follows them all never stops early)


@dataclass(frozen=True)
class Article:
    """One article: the ground truth a near-duplicate is judged by (`key`)."""

    key: int
    title: str
    paragraphs: tuple[str, ...]


def article(key: int, paragraphs: int = 12) -> Article:
    rng = random.Random(key)
    title = " ".join(rng.sample(TITLE_WORDS, 5)).capitalize()
    body = tuple(" ".join(_sentence(rng) for _ in range(rng.randint(3, 5))) for _ in range(paragraphs))
    return Article(key, title, body)


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(10, 18))).capitalize() + "."


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.sample(TITLE_WORDS, n)).capitalize()


def render(item: Article, boilerplate: int) -> str:
    """The article inside the boilerplate numbered `boilerplate` (same number, same boilerplate)."""
    rng = random.Random(boilerplate * 7919 + 1)
    nav = " ".join(f'<a href="/section/{rng.randint(1, 99)}">{_words(rng, 2)}</a>' for _ in range(rng.randint(5, 12)))
    sidebar = "".join(f'<li><a href="/a/{rng.randint(1, 9999)}">{_words(rng, 4)}</a></li>' for _ in range(8))
    parts: list[str] = []
    edited = rng.randrange(len(item.paragraphs)) if rng.random() < 0.3 else -1  # a copy edited by a word
    for i, paragraph in enumerate(item.paragraphs):
        if i == edited:
            words = paragraph.split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            paragraph = " ".join(words)
        parts.append(f"<p>{escape(paragraph)}</p>")
        if i % 2 == 1 and rng.random() < 0.7:
            ad = f'<a href="/ad/{rng.randint(1, 999)}">Sponsored: {_words(rng, 5)}</a>'
            parts.append(f'<aside class="ad">{ad}</aside>')
        elif i == 2 and rng.random() < 0.5:  # in the text itself, as many sites write them: extraction keeps them
            parts.append(f"<p>Advertisement. {_words(rng, 6)}.</p>")
        elif i == 3 and rng.random() < 0.5:
            parts.append(f'<p>Read more: <a href="/a/{rng.randint(1, 9999)}">{_words(rng, 7)}</a></p>')
    if rng.random() < 0.3:  # a correction note appended to some copies
        parts.append(f"<p>Correction: an earlier version of this article misstated {_words(rng, 12).lower()}.</p>")
    banner = '<div class="cookie-banner">We use cookies to improve your experience. <a href="/privacy">Accept</a></div>'
    dates = f"Published 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}, updated {rng.randint(1, 23)} hours ago"
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(item.title)} | '
        f"{_words(rng, 2)}</title></head><body>{banner if rng.random() < 0.6 else ''}<header><nav>{nav}</nav></header>"
        f'<main><article><h1>{escape(item.title)}</h1><p class="dateline">{dates}</p>{"".join(parts)}</article>'
        f'<aside class="most-read"><h3>Most read</h3><ul>{sidebar}</ul></aside></main>'
        f"<footer><p>{_words(rng, 6)}. Copyright 2026.</p><p>{_words(rng, 5)}</p></footer></body></html>"
    )


def tracking(rng: random.Random) -> str:
    return f"?utm_source={rng.choice(['news', 'social', 'mail'])}&utm_campaign={rng.randint(1, 10**6)}"


def variants(item: Article, count: int, first_boilerplate: int) -> list[tuple[str, str]]:
    """(URL path, HTML) of the article under `count` boilerplates, each URL with tracking parameters."""
    rng = random.Random(item.key + 17)
    return [(f"/article/{item.key}.html{tracking(rng)}", render(item, first_boilerplate + i)) for i in range(count)]


def add_trap_pages(site: Site, host: str, pages: int = TRAP_PAGES) -> str:
    """Add `/trap/<n>.html` to `host`: one article, new boilerplate each, linking to the next; returns the first URL."""
    trapped = article(4646)
    for n in range(pages):
        url = f"http://{host}/trap/{n}.html"
        html = render(trapped, n).replace("</article>", f'<p><a href="/trap/{n + 1}.html">next</a></p></article>')
        site.pages[url] = Page(url=url, status=200, content_type=HTML_TYPE, body=html.encode(),
                               links=[f"http://{host}/trap/{n + 1}.html"], link_texts=["next"])  # fmt: skip
    return f"http://{host}/trap/0.html"
