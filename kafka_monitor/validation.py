"""Where a kafka monitor plugin's schema is: a name of utils/schemas, or the plugin's own file.

Matching a message against the plugins' schemas is utils/schemas/matching.py, shared with the REST
gateway.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def schema_source(plugin: Any) -> str:
    """What `utils.schemas.matching` takes for a plugin: its `schema` name, or its schema file's
    absolute path (a relative one is read next to the plugin's module, as Scrapy Cluster's PLUGIN_DIR)."""
    name = str(plugin.schema)
    if not name.endswith(".json") or Path(name).is_absolute():
        return name
    module = sys.modules[type(plugin).__module__]
    return str(Path(module.__file__ or ".").resolve().parent / name)
