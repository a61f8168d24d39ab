"""One page's main content and metadata: trafilatura for the text, extruct for the structured data.

Runs inside an extraction worker process (utils/extract/pool.py): with `structured`, the only
modules that import trafilatura and extruct, so a crawler that extracts nothing never loads them.
The page is parsed once (lxml); the structured data is read off that tree before trafilatura,
which cleans a copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from copy import copy
from typing import Any

import trafilatura
from lxml.etree import strip_tags
from trafilatura.settings import Extractor, use_config
from trafilatura.utils import load_html, safe_base_url, safe_relative_url
from trafilatura.xml import xmltotxt

from utils.extract.simhash import as_hex, simhash

KINDS = ("text", "markdown", "metadata")  # what a crawl's `extract` may ask for
_CONFIG = use_config()
_CONFIG.set("DEFAULT", "EXTRACTION_TIMEOUT", "0")  # its timer is a SIGALRM of the main thread; the pool bounds time
STRUCTURED_BYTES_MAX = 256 * 1024  # bytes of JSON-LD / OpenGraph / microdata kept (a page can carry megabytes)
_OPTIONS = {(with_metadata, links): Extractor(
    config=_CONFIG, output_format="xml", fast=True, comments=False, tables=True, formatting=True, links=links,
    with_metadata=with_metadata) for with_metadata in (False, True) for links in (False, True)}  # fmt: skip
_BLANK_LINES = re.compile(r"\n{3,}")
_PUBLISHED = ("article:published_time",)
_MODIFIED = ("article:modified_time", "og:updated_time")


def extract(html: str, url: str, kinds: Iterable[str], fingerprint: bool) -> dict[str, Any]:
    """The page message's extraction fields for `kinds` (+ `simhash` with `fingerprint`).

    One trafilatura pass per page, whatever is asked: the Markdown is rendered from its tree, and the
    text from the same tree with the links unwrapped. A page trafilatura finds no main content in gets
    empty text, never an error."""
    tree = _parse(html)
    wanted = set(kinds)
    fields: dict[str, Any] = {}
    structured = _structured(tree, url) if "metadata" in wanted and tree is not None else {}
    document = _extract(tree, url, "metadata" in wanted, links="markdown" in wanted)
    body = getattr(document, "body", None)
    if "markdown" in wanted:
        # xmltotxt copies the tree before it rewrites it for Markdown: `body` is intact for the text below
        fields["markdown"] = _clean(xmltotxt(body, include_formatting=True)) if body is not None else ""
        if body is not None:
            strip_tags(body, "ref")  # the link's words stay in the text, its target does not
    text = _clean(xmltotxt(body, include_formatting=False)) if body is not None else ""
    if "text" in wanted:
        fields["text"] = text
    if "metadata" in wanted:
        fields["metadata"] = metadata(tree, document, structured)
    if fingerprint:
        fields["simhash"] = as_hex(simhash(text))
    return fields


def _extract(tree: Any, url: str, with_metadata: bool, links: bool) -> Any:
    """trafilatura's document (None when it finds nothing): tables and formatting kept, comments dropped.

    Its fast mode (no readability/jusText comparison) scores higher on the quality bench's set than
    the full cascade (token F1 0.962 vs 0.959) at 0.8x the CPU. The "xml" format leaves the body as a
    tree (the "python" format would also render it as text, which is done here once, as wanted)."""
    if tree is None:
        return None
    options = copy(_OPTIONS[with_metadata, links])  # the parsed config reused; the URL is the page's
    # Without a URL trafilatura leaves links as written: resolved below on the kept ones only, not on
    # every link of the page before the boilerplate is cut (6 % of a realistic page's extraction)
    options.url = url if with_metadata else None
    options.source = url
    document = trafilatura.bare_extraction(tree, options=options)
    body = getattr(document, "body", None)
    if links and body is not None and not with_metadata:
        _absolute_links(body, url)
    return document


def _absolute_links(body: Any, url: str) -> None:
    """Each kept link's target as trafilatura resolves it when given the URL."""
    base = safe_base_url(url)
    for ref in body.iter("ref"):
        target = ref.get("target")
        if target:
            ref.set("target", safe_relative_url(base, target) or target)


def _parse(html: str) -> Any:
    """trafilatura's own parse (its repairs and parser options): the text scores as trafilatura alone does."""
    try:
        return load_html(html)
    except (ValueError, TypeError):  # nothing lxml calls a document
        return None


def _structured(tree: Any, url: str) -> dict[str, Any]:
    """extruct's structured data, imported with the first page that asks for metadata: its import
    (mf2py, bs4, rdflib's parsers) cost a worker about 0.2 s of CPU, 60 small pages' text and Markdown."""
    from utils.extract.structured import structured

    return structured(tree, url)


def _clean(text: str | None) -> str:
    """Runs of blank lines made one; the substring test first, as the regex scan costs ~0.3 ms on a 30 KB text."""
    text = text or ""
    return (_BLANK_LINES.sub("\n\n", text) if "\n\n\n" in text else text).strip()


def metadata(tree: Any, document: Any, structured: dict[str, Any]) -> dict[str, Any]:
    """Title, language, dates, authors, canonical URL, description, site name and the structured data."""
    opengraph = structured.get("opengraph") or {}
    author = getattr(document, "author", None)
    fields = {
        "title": getattr(document, "title", None) or _first(tree, "//title/text()"),
        "language": _language(tree, document),
        "published": _dated(structured, opengraph, "datePublished", _PUBLISHED) or getattr(document, "date", None),
        "modified": _dated(structured, opengraph, "dateModified", _MODIFIED),
        "authors": [name.strip() for name in author.split(";") if name.strip()] if author else [],
        "canonical_url": _first(tree, '//link[@rel="canonical"]/@href') or getattr(document, "url", None),
        "description": getattr(document, "description", None),
        "sitename": getattr(document, "sitename", None),
        **structured,
    }
    return fields


def _first(tree: Any, xpath: str) -> str | None:
    if tree is None:
        return None
    found = tree.xpath(xpath)
    return str(found[0]).strip() or None if found else None


def _language(tree: Any, document: Any) -> str | None:
    """The page's declared language (`<html lang>`, else Content-Language in a meta), else trafilatura's."""
    declared = _first(tree, "/html/@lang") or _first(tree, '//meta[@http-equiv="content-language"]/@content')
    return declared or getattr(document, "language", None)


def _dated(structured: dict[str, Any], opengraph: dict[str, Any], json_ld: str, properties: tuple[str, ...]
           ) -> str | None:
    """A date the page states (JSON-LD, then OpenGraph's article properties); trafilatura's guess comes after."""
    for item in structured.get("json_ld") or ():
        if isinstance(item, dict) and isinstance(item.get(json_ld), str):
            return str(item[json_ld])
    for name in properties:
        value = opengraph.get(name)
        if isinstance(value, str):
            return value
    return None
