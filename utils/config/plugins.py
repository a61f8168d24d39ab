"""One plugin loader for both monitors: `{"dotted.path.Class": rank}`, None disables.

A plugin class is built with `from_settings(settings, **context)` when it has one, else with
`cls(**context)`; raising `NotConfigured` there leaves it out (as Scrapy's middlewares do).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)


class NotConfigured(Exception):
    """Raised by a plugin's factory to opt out under the current settings."""


def load_object(path: str) -> Any:
    """`package.module.Name` -> the object; ImportError names what was missing."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ImportError(f"{path!r} is not a dotted path")
    module = importlib.import_module(module_name)
    try:
        return getattr(module, name)
    except AttributeError as exc:
        raise ImportError(f"module {module_name!r} has no {name!r}") from exc


def load_plugins(spec: Mapping[str, int | None], settings: Any, **context: Any) -> list[Any]:
    """Instances of the enabled plugins, in ascending rank."""
    enabled = sorted((rank, path) for path, rank in spec.items() if rank is not None)
    plugins = []
    for rank, path in enabled:
        cls = load_object(path)
        try:
            factory = getattr(cls, "from_settings", None)
            plugin = factory(settings, **context) if factory else cls(**context)
        except NotConfigured as exc:
            log.info("Plugin not configured", extra={"plugin": path, "reason": str(exc)})
            continue
        plugin.rank = rank
        plugins.append(plugin)
    return plugins
