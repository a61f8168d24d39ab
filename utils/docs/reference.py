"""Reference tables generated from the code: settings, request fields, metrics and Redis keys.

The documentation site's pages hold these tables between markers; `sync` rewrites them, and a test
compares each page with `blocks()`, so the reference cannot drift from the code it describes.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from prometheus_client.metrics import MetricWrapperBase

from utils.apps import metrics as apps_metrics
from utils.config import settings_doc
from utils.freshness import metrics as freshness_metrics
from utils.frontier import capacity as capacity_metrics
from utils.frontier import keys as frontier_keys
from utils.frontier import ladder_metrics
from utils.frontier import metrics as frontier_metrics
from utils.observability.metrics import group_lag, registry
from utils.proxies import keys as proxy_keys
from utils.proxies import metrics as proxy_metrics

PIPE = settings_doc.PIPE
SCHEMAS = ("crawl", "action", "stats", "zookeeper")


def marker(name: str, end: bool = False) -> str:
    return f"<!-- generated:{name}:{'end' if end else 'begin'} -->"


def _cell(text: object) -> str:
    return str(text).replace("|", PIPE).replace("\n", " ")


def _code(value: Any) -> str:
    return f"`{_cell(json.dumps(value, ensure_ascii=False))}`"


# --- Request fields, from the JSON Schema files ---------------------------------------------------
def _limits(spec: dict[str, Any]) -> str:
    """What a field's schema allows beyond its type: bounds, enums, patterns, item rules."""
    parts = []
    for word, label in (("minimum", ">="), ("maximum", "<="), ("minLength", "length >="),
                        ("maxLength", "length <="), ("minItems", "items >="), ("maxItems", "items <=")):  # fmt: skip
        if word in spec:
            parts.append(f"{label} {spec[word]}")
    if "enum" in spec:
        parts.append("one of " + ", ".join(_code(v) for v in spec["enum"] if v is not None))
    if "pattern" in spec:
        parts.append(f"matches `{_cell(spec['pattern'])}`")
    if isinstance(spec.get("items"), dict):
        inner = _limits(spec["items"])
        parts.append(f"each {spec['items'].get('type', 'item')}" + (f": {inner}" if inner else ""))
    return "; ".join(parts)


def request_fields(kind: str) -> str:
    """The field table of one request kind (`crawl`, `action`, `stats`, `zookeeper`)."""
    schema = json.loads(resources.files("utils.schemas").joinpath(f"{kind}.json").read_text())
    required = set(schema.get("required", []))
    rows = ["| Field | Type | Required | Default | Allowed |", "|---|---|---|---|---|"]
    for name, spec in schema.get("properties", {}).items():
        kinds = spec.get("type", "any")
        shown = " or ".join(kinds) if isinstance(kinds, list) else kinds
        default = _code(spec["default"]) if "default" in spec else ""
        rows.append(f"| `{name}` | {shown} | {'yes' if name in required else ''} | {default} | {_limits(spec)} |")
    extra = "refused" if schema.get("additionalProperties") is False else "allowed"
    return "\n".join(rows) + f"\n\nOther fields: {extra}."


# --- Metrics, from the one registry and the scrape-time collectors --------------------------------
def _metric_rows() -> Iterator[tuple[str, str, str, str]]:
    suffix = {"counter": "_total"}
    for value in vars(registry).values():
        if isinstance(value, MetricWrapperBase):
            kind = str(value._type)  # prometheus-client keeps name, type and labels on these attributes
            yield str(value._name) + suffix.get(kind, ""), kind, ", ".join(value._labelnames), value._documentation
    for family in frontier_metrics._families().values():
        yield family.name, "gauge (read from Redis at scrape time)", ", ".join(family._labelnames), family.documentation
    for family in capacity_metrics._families().values():  # the autoscaling signal (issue 32)
        yield family.name, "gauge (scaling signal, from Redis)", ", ".join(family._labelnames), family.documentation
    for family in group_lag._families().values():  # ... and the consumer groups' (issue 32)
        yield family.name, "gauge (scaling signal, from Kafka)", ", ".join(family._labelnames), family.documentation
    for family in ladder_metrics.families().values():  # the ladder and Redis memory alerts (issue 33)
        yield family.name, "gauge (read from Redis at scrape time)", ", ".join(family._labelnames), family.documentation
    for name, text in freshness_metrics.GAUGES.values():  # revisits per crawl (issue 31), by `shoal revisit`
        yield name, "gauge (read from PostgreSQL at scrape time)", "appid, crawlid", text
    no_apps: Any = SimpleNamespace(hgetall=lambda _key: {})
    for apps_family in apps_metrics.AppsCollector(no_apps).collect():  # per app, exported by the redis monitor
        labels = ", ".join(getattr(apps_family, "_labelnames", ()))  # a GaugeMetricFamily's, not typed on Metric
        yield apps_family.name, "gauge (per app, read from Redis)", labels, apps_family.documentation
    empty_pool: Any = SimpleNamespace(state=list)
    for proxy_family in proxy_metrics.ProxyCollector(empty_pool).collect():
        labels = ", ".join(getattr(proxy_family, "_labelnames", ()))  # a GaugeMetricFamily keeps its label names
        yield proxy_family.name, "gauge (proxy pool, read from Redis)", labels, proxy_family.documentation


def metrics_table() -> str:
    rows = ["| Metric | Type | Labels | Meaning |", "|---|---|---|---|"]
    for name, kind, labels, doc in sorted(_metric_rows()):
        rows.append(f"| `{name}` | {kind} | {_cell(labels)} | {_cell(doc)} |")
    return "\n".join(rows)


# --- Redis keys, from the key modules -------------------------------------------------------------
def _constant_comments(module: ModuleType) -> dict[str, str]:
    source = inspect.getsource(module)
    lines = source.splitlines()
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            line = lines[node.lineno - 1]
            if "#" in line:
                found[node.targets[0].id] = line.split("#", 1)[1].strip()
    return found


PLACEHOLDERS = {"key": "<prefix><domain>", "partition": "<partition>"}  # arguments a key function checks


def _template(function: Callable[..., str]) -> str:
    names = list(inspect.signature(function).parameters)
    return function(*(PLACEHOLDERS.get(name, f"<{name}>") for name in names))


def _first_paragraph(doc: str | None) -> str:
    return re.sub(r"\s+", " ", (doc or "").split("\n\n")[0]).strip()


def _key_rows(module: ModuleType) -> Iterator[tuple[str, str, str]]:
    comments = _constant_comments(module)
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", module.__name__) != module.__name__:
            continue
        if inspect.isfunction(value) and inspect.signature(value).return_annotation in ("str", str):
            yield f"{module.__name__.split('.')[-2]}.keys.{name}", _template(value), _first_paragraph(value.__doc__)
        elif isinstance(value, str) and name in comments:
            yield f"{module.__name__.split('.')[-2]}.keys.{name}", value, comments[name]


def redis_keys_table() -> str:
    rows = ["| Defined by | Key (or value) | What it holds |", "|---|---|---|"]
    for module in (frontier_keys, proxy_keys):
        for where, template, doc in _key_rows(module):
            shown = _cell(template).replace("\t", "\\t")  # a tab separates the fields of some members
            rows.append(f"| `{where}` | `{shown}` | {_cell(doc)} |")
    return "\n".join(rows)


# --- Lua scripts, from their opening contracts --------------------------------------------------
LUA_PACKAGES = ("utils.frontier", "utils.jobs", "utils.proxies")


def _purpose(source: str) -> str:
    """The opening comment's first paragraph, without the `name.lua:` it starts with."""
    lines = []
    for line in source.splitlines():
        if not line.startswith("--") or line.strip() == "--":
            break
        lines.append(line[2:].strip())
    return " ".join(lines).split(": ", 1)[-1]


def lua_scripts_table() -> str:
    rows = ["| Script | What it does (its opening contract's first lines) |", "|---|---|"]
    for package in LUA_PACKAGES:
        root = resources.files(package).joinpath("lua")
        for script in sorted(Path(str(root)).rglob("*.lua")):
            name = script.relative_to(Path(str(root)).parents[0]).as_posix()
            purpose = _cell(_purpose(script.read_text())).replace("<", "&lt;")  # `<spiderid>` is not a tag
            rows.append(f"| `{package.replace('.', '/')}/{name}` | {purpose} |")
    return "\n".join(rows)


# --- The pages -----------------------------------------------------------------------------------
def blocks() -> dict[str, str]:
    """Every generated block by name: `settings`, `metrics`, `redis-keys`, `lua-scripts`, `request-<kind>`."""
    found = {"settings": settings_doc.table(), "metrics": metrics_table(), "redis-keys": redis_keys_table(),
             "lua-scripts": lua_scripts_table()}  # fmt: skip
    found.update({f"request-{kind}": request_fields(kind) for kind in SCHEMAS})
    return found


def wrapped(name: str, body: str) -> str:
    return f"{marker(name)}\n{body}\n{marker(name, end=True)}"


BLOCK = re.compile(r"<!-- generated:(?P<name>[a-z-]+):begin -->\n.*?<!-- generated:(?P=name):end -->", re.S)


def render(text: str, generated: dict[str, str]) -> str:
    """`text` with each generated block replaced by its current content; an unknown name is an error."""

    def replace(match: re.Match[str]) -> str:
        return wrapped(match["name"], generated[match["name"]])

    return BLOCK.sub(replace, text)


def sync(docs: Path) -> list[Path]:
    """Rewrites every generated block under `docs`; returns the pages that changed."""
    generated = blocks()
    changed = []
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text()
        updated = render(text, generated)
        if updated != text:
            page.write_text(updated)
            changed.append(page)
    return changed
