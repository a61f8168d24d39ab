"""The README stays true: its settings table is the one generated from the defaults."""

from __future__ import annotations

from pathlib import Path

from utils.config import settings_doc

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_settings_table_matches_the_defaults() -> None:
    text = README.read_text()
    start, end = text.index(settings_doc.BEGIN), text.index(settings_doc.END) + len(settings_doc.END)
    assert text[start:end] == settings_doc.block(), "run: python -m utils.config.settings_doc, paste into README.md"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text()
    assert text.index("make run") < text.index("## Architecture")
    assert text.index("make test") < text.index("## Architecture")
