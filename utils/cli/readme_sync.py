"""Rewrite the docs site's generated reference tables (settings, request fields, metrics, Redis keys)
from the code: `python -m utils.cli.readme_sync`."""

from __future__ import annotations

from pathlib import Path

from utils.docs.reference import sync

if __name__ == "__main__":
    changed = sync(Path("docs"))
    print("\n".join(f"{page} updated" for page in changed) or "docs already current")
