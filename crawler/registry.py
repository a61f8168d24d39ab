"""Which spiders a crawler can run: the built-in ones, SPIDER_MODULES and the `shoal.spiders` entry points.

Users add spiders without touching Shoal: a module listed in SPIDER_MODULES (searched with its
submodules, as Scrapy's SPIDER_MODULES) or an installed package declaring an entry point in the
group `shoal.spiders` (pointing at a spider class or a module). Every problem found (an import
error, two spiders with one name, a class that is not a Shoal spider) is reported together, once,
at start-up, instead of failing on the first page.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from scrapy import Spider
from scrapy.utils import misc

from crawler.spiders import SPIDERS
from crawler.spiders.base import RedisSpider
from utils.config.errors import ConfigError, last_line
from utils.config.settings import Settings

ENTRY_POINT_GROUP = "shoal.spiders"


@dataclass(frozen=True)
class FoundSpider:
    name: str
    cls: type[RedisSpider]
    origin: str  # "built-in", "SPIDER_MODULES: shop.spiders" or "entry point shop (shop-example)"

    @property
    def path(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"


class SpiderRegistryError(ConfigError):
    """Spiders could not be loaded; the message lists every problem, one a line."""


def discover(settings: Settings) -> dict[str, FoundSpider]:
    """Every spider by name; raises SpiderRegistryError listing all problems at once."""
    collector = _Collector()
    for cls in SPIDERS.values():
        collector.add(cls, "built-in")
    for module_name in settings.get_list("SPIDER_MODULES"):
        collector.add_modules(module_name)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        collector.add_entry_point(entry)
    if collector.problems:
        raise SpiderRegistryError("\n".join(collector.problems))
    return collector.found


class _Collector:
    def __init__(self) -> None:
        self.found: dict[str, FoundSpider] = {}
        self.problems: list[str] = []

    def add(self, cls: Any, origin: str) -> None:
        name = getattr(cls, "name", None)
        if not (inspect.isclass(cls) and issubclass(cls, Spider)) or not name:
            self.problems.append(f"{origin}: {_qualname(cls)} is not a spider class with a name")
            return
        if not issubclass(cls, RedisSpider):
            self.problems.append(f"{origin}: spider {name!r} ({_qualname(cls)}) must subclass "
                                 "crawler.spiders.ShoalSpider")  # fmt: skip
            return
        known = self.found.get(name)
        if known is None:
            self.found[name] = FoundSpider(name, cls, origin)
        elif known.cls is not cls:
            self.problems.append(f"spider name {name!r} is defined twice: {known.path} ({known.origin}) and "
                                 f"{_qualname(cls)} ({origin})")  # fmt: skip

    def add_modules(self, module_name: str) -> None:
        origin = f"SPIDER_MODULES: {module_name}"
        try:
            modules = list(_walk_modules(module_name))
        except Exception as exc:
            self.problems.append(f"{origin}: cannot import: {last_line(exc)}")
            return
        for module in modules:
            for cls in _module_spiders(module):
                self.add(cls, origin)

    def add_entry_point(self, entry: EntryPoint) -> None:
        origin = _entry_origin(entry)
        try:
            target = entry.load()
        except Exception as exc:
            self.problems.append(f"{origin}: cannot import {entry.value}: {last_line(exc)}")
            return
        for cls in _module_spiders(target) if isinstance(target, ModuleType) else [target]:
            self.add(cls, origin)


def spider_class(settings: Settings, name: str) -> type[RedisSpider]:
    """The class of spider `name`; SpiderRegistryError names the known ones when it is missing."""
    spiders = discover(settings)
    if name not in spiders:
        raise SpiderRegistryError(f"unknown spider {name!r}; known: {', '.join(sorted(spiders))}")
    return spiders[name].cls


def spiders_command(settings: Settings, args: argparse.Namespace) -> int:
    """`shoal spiders`: every spider with its class and where it comes from."""
    try:
        spiders = discover(settings)
    except SpiderRegistryError as exc:
        print(f"shoal spiders: {exc}", file=sys.stderr)
        return 2
    width = max(len(name) for name in spiders)
    for name in sorted(spiders):
        spider = spiders[name]
        print(f"{name:<{width}}  {spider.path}  [{spider.origin}]")
    return 0


def _walk_modules(path: str) -> Any:
    """A module and its submodules (Scrapy's walk_modules; its iterator form where Scrapy has it)."""
    walk = getattr(misc, "walk_modules_iter", None) or misc.walk_modules
    return walk(path)


def _module_spiders(module: ModuleType) -> list[type]:
    """Spider classes defined in the module itself (not imported into it), as Scrapy's loader."""
    return [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Spider) and obj.__module__ == module.__name__
        and getattr(obj, "name", None)
    ]  # fmt: skip


def _entry_origin(entry: EntryPoint) -> str:
    dist = entry.dist.name if entry.dist is not None else "?"
    return f"entry point {entry.name} ({dist})"


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
