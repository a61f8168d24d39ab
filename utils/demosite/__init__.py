"""Deterministic local demo website for `make run`, the tests and the benchmarks: the generator, the
server (one socket per loopback host, an access log with arrival times) and the broad hub site.

May import: `utils.config`.
"""

from __future__ import annotations

from utils.demosite.generator import DISALLOWED_PREFIX, PDF_PATH, Page, Site, generate_site
from utils.demosite.server import SiteServer

__all__ = ["DISALLOWED_PREFIX", "PDF_PATH", "Page", "Site", "SiteServer", "generate_site"]
