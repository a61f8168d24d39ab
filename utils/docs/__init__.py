"""The documentation site's generated reference pages (`python -m utils.cli.readme_sync` writes them).

Each generated block sits between `<!-- generated:<name>:begin -->` and `<!-- generated:<name>:end -->`
in a page under docs/; `tests/docs/test_reference_pages.py` fails when a block differs from the code.
May import: `config`, `schemas`, `observability`, `frontier`, `proxies` (it reads them, nothing imports it).
"""
