"""The docs site's reference tables are the ones generated from the code, and the README starts right."""

from __future__ import annotations

import re

from tests.docs.snippets import DOCS, REPO
from utils.config.settings import default_values
from utils.docs import reference


def generated_on_pages() -> dict[str, str]:
    """Every generated block found under docs/, by name, with the page it is on."""
    found = {}
    for page in DOCS.rglob("*.md"):
        for match in reference.BLOCK.finditer(page.read_text()):
            assert match["name"] not in found, f"{match['name']} generated twice: {found[match['name']]} and {page}"
            found[match["name"]] = str(page.relative_to(REPO))
    return found


def test_every_generated_table_is_on_a_page_and_current() -> None:
    on_pages = generated_on_pages()
    assert set(on_pages) == set(reference.blocks()), "every generated table on exactly one page"
    for page in {DOCS.parent / path for path in on_pages.values()}:
        text = page.read_text()
        assert reference.render(text, reference.blocks()) == text, f"run: python -m utils.cli.readme_sync ({page})"


def test_the_settings_reference_lists_every_setting_with_its_variable() -> None:
    text = (DOCS / "reference" / "settings.md").read_text()
    for name in default_values():
        assert f"| `{name}` | `SHOAL_{name}` |" in text


def test_the_key_reference_covers_every_key_function() -> None:
    from utils.frontier import keys

    text = (DOCS / "reference" / "redis-keys.md").read_text()
    functions = [name for name, value in vars(keys).items() if callable(value) and not name.startswith("_")]
    assert functions
    assert [name for name in functions if f"`frontier.keys.{name}`" not in text] == []


def test_readme_opens_with_the_two_commands_and_keeps_its_security_and_performance_sections() -> None:
    text = (REPO / "README.md").read_text()
    assert text.index("make run") < text.index("## A tour")
    assert text.index("make test") < text.index("## A tour")
    assert len(re.findall(r"^## Security$", text, re.M)) == 1
    assert len(re.findall(r"^## Performance$", text, re.M)) == 1
    start_page = "the README is a start page (and the Security and Performance tables); details belong on the docs site"
    assert len(text.splitlines()) < 110, start_page
