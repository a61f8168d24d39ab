"""The settings reference table (docs/reference/settings.md), generated from utils/config/default_settings.py
(`python -m utils.config.settings_doc`).

A test (tests/docs) compares the docs page with this output, so the documented settings never drift from the code.
"""

from __future__ import annotations

import ast
import json
from importlib import resources

from utils.config.settings import default_values

BEGIN = "<!-- settings-table:begin -->"
END = "<!-- settings-table:end -->"
PIPE = "\\|"  # a literal | inside a Markdown table cell


def _comments() -> dict[str, str]:
    """Each setting's trailing comment, found by parsing the defaults module's source."""
    source = resources.files("utils.config").joinpath("default_settings.py").read_text()
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id.isupper():
            line = lines[node.lineno - 1]
            found[target.id] = line.split("#", 1)[1].strip() if "#" in line else ""
    return found


def table() -> str:
    comments = _comments()
    rows = ["| Setting | Environment variable | Default | Meaning |", "|---|---|---|---|"]
    for name, value in default_values().items():
        shown = json.dumps(value) if not isinstance(value, str) else (f'"{value}"' if value else '""')
        meaning = comments.get(name, "").replace("|", PIPE)
        rows.append(f"| `{name}` | `SHOAL_{name}` | `{shown.replace('|', PIPE)}` | {meaning} |")
    return "\n".join(rows)


def block() -> str:
    return f"{BEGIN}\n{table()}\n{END}"


if __name__ == "__main__":
    print(block())
