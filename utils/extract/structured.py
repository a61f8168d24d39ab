"""A page's structured data (JSON-LD, OpenGraph, microdata) by extruct, read off the page's lxml tree.

Imported by utils/extract/content.py with the first page that asks for metadata, inside a worker.
"""

from __future__ import annotations

from typing import Any

from extruct.jsonld import JsonLdExtractor
from extruct.opengraph import OpenGraphExtractor
from extruct.w3cmicrodata import LxmlMicrodataExtractor


def structured(tree: Any, url: str) -> dict[str, Any]:
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
