"""Rewrite the README's settings table from the defaults: `python -m utils.cli.readme_sync`."""

from __future__ import annotations

from pathlib import Path

from utils.config import settings_doc


def sync(readme: Path) -> bool:
    """Returns True when the file changed."""
    text = readme.read_text()
    start = text.index(settings_doc.BEGIN)
    end = text.index(settings_doc.END) + len(settings_doc.END)
    updated = text[:start] + settings_doc.block() + text[end:]
    readme.write_text(updated)
    return updated != text


if __name__ == "__main__":
    print("README.md updated" if sync(Path("README.md")) else "README.md already current")
