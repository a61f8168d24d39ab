"""One page's main content and metadata: trafilatura for the text, extruct for the structured data.

Runs inside an extraction worker process (utils/extract/pool.py): the only module that imports
trafilatura and extruct, so a crawler that extracts nothing never loads them. The page is parsed
once (lxml); the structured data is read off that tree before trafilatura, which cleans a copy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import trafilatura
from extruct.jsonld import JsonLdExtractor
from extruct.opengraph import OpenGraphExtractor
from extruct.w3cmicrodata import LxmlMicrodataExtractor
from trafilatura.settings import use_config
from trafilatura.utils import load_html
from trafilatura.xml import xmltotxt

from utils.extract.simhash import as_hex, simhash

KINDS = ("text", "markdown", "metadata")  # what a crawl's `extract` may ask for
_CONFIG = use_config()
_CONFIG.set("DEFAULT", "EXTRACTION_TIMEOUT", "0")  # its timer is a SIGALRM of the main thread; the pool bounds time
STRUCTURED_BYTES_MAX = 256 * 1024  # bytes of JSON-LD / OpenGraph / microdata kept (a page can carry megabytes)
_PUBLISHED = ("article:published_time",)
_MODIFIED = ("article:modified_time", "og:updated_time")


def extract(html: str, url: str, kinds: Iterable[str], fingerprint: bool) -> dict[str, Any]:
    """The page message's extraction fields for `kinds` (+ `simhash` with `fingerprint`).

    A page trafilatura finds no main content in gets empty text, never an error."""
    tree = _parse(html)
    wanted = set(kinds)
    fields: dict[str, Any] = {}
    structured = _structured(tree, url) if "metadata" in wanted and tree is not None else {}
    links_first = "text" not in wanted and not fingerprint  # Markdown alone: one pass, with the links
    document = _extract(tree, url, "metadata" in wanted, links=links_first)
    body = getattr(document, "body", None)
    text = _clean(xmltotxt(body, include_formatting=False)) if body is not None else ""
    if "text" in wanted:
        fields["text"] = text
    if "markdown" in wanted:
        # A second pass keeps the links: in the first, trafilatura's link-density rules would keep
        # link-heavy blocks in the text (token F1 0.918 instead of 0.959 on the quality bench's set).
        linked = document if links_first else _extract(tree, url, False, links=True)
        linked_body = getattr(linked, "body", None)
        fields["markdown"] = _clean(xmltotxt(linked_body, include_formatting=True)) if linked_body is not None else ""
    if "metadata" in wanted:
        fields["metadata"] = metadata(tree, document, structured)
    if fingerprint:
        fields["simhash"] = as_hex(simhash(text))
    return fields


def _extract(tree: Any, url: str, with_metadata: bool, links: bool) -> Any:
    """trafilatura's document (None when it finds nothing): tables and formatting kept, comments dropped."""
    if tree is None:
        return None
    return trafilatura.bare_extraction(
        tree, url=url, with_metadata=with_metadata, include_comments=False, include_tables=True,
        include_links=links, include_formatting=True, output_format="python", config=_CONFIG,
    )  # fmt: skip


def _parse(html: str) -> Any:
    """trafilatura's own parse (its repairs and parser options): the text scores as trafilatura alone does."""
    try:
        return load_html(html)
    except (ValueError, TypeError):  # nothing lxml calls a document
        return None


def _clean(text: str | None) -> str:
    return re.sub(r"\n{3,}", "\n\n", text or "").strip()


def _structured(tree: Any, url: str) -> dict[str, Any]:
    """JSON-LD items, OpenGraph properties and microdata items; a malformed block is left out."""
    found: dict[str, Any] = {}
    for name, read in (("json_ld", lambda: JsonLdExtractor().extract_items(tree, base_url=url)),
                       ("opengraph", lambda: _opengraph(tree)),
                       ("microdata", lambda: LxmlMicrodataExtractor().extract_items(tree, url))):  # fmt: skip
        try:
            value = read()
        except Exception:  # noqa: BLE001 - extruct raises whatever its parsers do on a bad block
            continue
        if value:
            found[name] = list(value) if not isinstance(value, dict) else value
    return found


def _opengraph(tree: Any) -> dict[str, Any]:
    """`og:*`, `article:*`, ... properties as one object; a repeated property becomes a list."""
    found: dict[str, Any] = {}
    for group in OpenGraphExtractor().extract_items(tree):
        for key, value in group.get("properties", ()):
            if key in found:
                found[key] = [*found[key], value] if isinstance(found[key], list) else [found[key], value]
            else:
                found[key] = value
    return found


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
