"""Reading a component's /metrics and its JSON log lines in tests."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

REQUIRED_LOG_KEYS = ("timestamp", "level", "logger", "message")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape as {(name, sorted labels): value}."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (n, got), value in samples.items() if n == name and wanted <= set(got))


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a component's log as JSON; fails on a line that is not a JSON object with the
    keys ELK needs."""
    entries = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        entry = json.loads(line)  # a non-JSON line fails the test here, with the line in the traceback
        assert isinstance(entry, dict), f"{path.name}:{number} is not a JSON object: {line}"
        missing = [key for key in REQUIRED_LOG_KEYS if key not in entry]
        assert not missing, f"{path.name}:{number} lacks {missing}: {line}"
        entries.append(entry)
    return entries


def events(entries: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    return [entry for entry in entries if entry["message"] == message]
