"""Deterministic local demo website for `make run`, the tests and the benchmarks."""

from __future__ import annotations

from utils.demosite.catalogue import Catalogue, Product, generate_catalogue
from utils.demosite.generator import DISALLOWED_PREFIX, PDF_PATH, Page, Site, generate_site
from utils.demosite.server import SiteServer

__all__ = [
    "DISALLOWED_PREFIX",
    "PDF_PATH",
    "Catalogue",
    "Page",
    "Product",
    "Site",
    "SiteServer",
    "generate_catalogue",
    "generate_site",
]
