"""The process's one Prometheus registry and every metric a Shoal component exports.

All metrics live in `REGISTRY` (not prometheus-client's global one), so /metrics shows Shoal's series
plus the process collectors, and nothing a third-party library registers by side effect. Label values
that come from data (reasons, topics, routes, spider ids) pass through `LABELS`, which keeps at most
METRICS_LABEL_VALUES distinct values per label and reports the rest as "other": a bad client sending
random spider ids must not grow Prometheus without bound.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

OTHER = "other"  # the label value every value past the budget is reported as
DEFAULT_LABEL_VALUES = 50  # until start_metrics_server reads METRICS_LABEL_VALUES

disable_created_metrics()  # no `*_created` twin of every counter: half the series, nothing a dashboard uses
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
PlatformCollector(registry=REGISTRY)  # python_info
REGISTRY.register(GC_COLLECTOR)  # python_gc_*; the collector object is stateless, sharing it is safe


class LabelBudget:
    """At most `limit` distinct values per label name; later new values become OTHER."""

    def __init__(self, limit: int = DEFAULT_LABEL_VALUES) -> None:
        self.limit = limit
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def __call__(self, label: str, value: object) -> str:
        text = str(value) if value not in (None, "") else "unknown"
        with self._lock:
            seen = self._seen.setdefault(label, set())
            if text in seen:
                return text
            if len(seen) >= self.limit:
                return OTHER
            seen.add(text)
            return text


class ProcessState:
    """Which component this process is; set once by start_metrics_server (or `set_component`)."""

    def __init__(self) -> None:
        self.component = "unknown"
        self.dependencies: dict[str, bool] = {}
        self.lock = threading.Lock()


LABELS = LabelBudget()
STATE = ProcessState()

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# --- Every component: identity, health, dead letters, Kafka -------------------------------------
PROCESS_INFO = Info("shoal_process", "Which Shoal component this process runs", ["component"], registry=REGISTRY)
DEPENDENCY_UP = Gauge(
    "shoal_dependency_up", "1 while the service answers this process, 0 while it does not",
    ["component", "dependency"], registry=REGISTRY,
)  # fmt: skip
DEPENDENCY_OUTAGES = Counter(
    "shoal_dependency_outages_total", "Times the service stopped answering this process (each outage once)",
    ["component", "dependency"], registry=REGISTRY,
)  # fmt: skip
HEALTHY = Gauge(
    "shoal_healthy", "1 when every service this process uses answers (process health)", ["component"],
    registry=REGISTRY,
)  # fmt: skip
LOOP_TIMESTAMP = Gauge(
    "shoal_loop_timestamp_seconds", "Unix time of the main loop's last turn (a stuck loop stops moving)",
    ["component"], registry=REGISTRY,
)  # fmt: skip
DEAD_LETTERS = Counter(
    "shoal_dead_letters_total", "Messages or requests written to the dead-letter topic",
    ["component", "reason"], registry=REGISTRY,
)  # fmt: skip
CONSUMER_LAG = Gauge(
    "shoal_kafka_consumer_lag", "Messages between the consumer's position and the partition's end",
    ["component", "topic", "partition"], registry=REGISTRY,
)  # fmt: skip
PRODUCED = Counter(
    "shoal_kafka_produced_total", "Messages sent to Kafka by outcome (sent = confirmed by the broker)",
    ["component", "topic", "outcome"], registry=REGISTRY,
)  # fmt: skip
BATCH_SECONDS = Histogram(
    "shoal_batch_duration_seconds", "Time to process one batch of the main loop", ["component"],
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)  # fmt: skip

# --- Crawler ------------------------------------------------------------------------------------
PAGES = Counter(
    "shoal_pages_total", "Pages crawled, by HTTP status (error = no response)", ["spiderid", "status"],
    registry=REGISTRY,
)  # fmt: skip
PAGE_BYTES = Counter("shoal_page_bytes_total", "Bytes of page bodies crawled", ["spiderid"], registry=REGISTRY)
DOWNLOAD_SECONDS = Histogram(
    "shoal_download_duration_seconds", "Download time of one page", ["spiderid"], buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)  # fmt: skip
RETRIES = Counter(
    "shoal_retries_total", "Requests put back to be tried again, by reason", ["spiderid", "reason"],
    registry=REGISTRY,
)  # fmt: skip
BLOCKS = Counter(
    "shoal_blocks_total", "Responses the block detector called a site pushing back, by reason (issue 33)",
    ["spiderid", "reason"], registry=REGISTRY,
)  # fmt: skip
THROTTLE_DENIALS = Counter(
    "shoal_throttle_denials_total", "Domains a pop passed over because their throttle window was full",
    ["spiderid"], registry=REGISTRY,
)  # fmt: skip
ENQUEUED = Counter(
    "shoal_requests_enqueued_total", "Requests written to the frontier", ["component", "spiderid"],
    registry=REGISTRY,
)  # fmt: skip
DROPPED = Counter(
    "shoal_requests_dropped_total", "Requests refused by a filter, by reason (duplicate, page_limit, ...)",
    ["component", "spiderid", "reason"], registry=REGISTRY,
)  # fmt: skip
LEASES_RETURNED = Counter(
    "shoal_leases_returned_total", "Leased requests a stopping spider gave back to the frontier", ["spiderid"],
    registry=REGISTRY,
)  # fmt: skip

# --- Render spider (crawler/rendering.py) -------------------------------------------------------
RENDER_PAGES = Counter(
    "shoal_render_pages_total", "Pages loaded in the browser, by outcome (rendered, failed)", ["outcome"],
    registry=REGISTRY,
)  # fmt: skip
RENDER_SECONDS = Histogram(
    "shoal_render_duration_seconds", "Load-and-settle time of one rendered page", buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)  # fmt: skip
RENDER_BROWSER_MEMORY = Gauge(
    "shoal_render_browser_memory_bytes", "Resident memory (PSS) of this process's browser, all its processes",
    registry=REGISTRY,
)  # fmt: skip
RENDER_BROWSER_RESTARTS = Counter(
    "shoal_render_browser_restarts_total", "Browsers replaced, by reason (pages, memory, crash)", ["reason"],
    registry=REGISTRY,
)  # fmt: skip

# --- Kafka monitor ------------------------------------------------------------------------------
INCOMING = Counter(
    "shoal_incoming_messages_total", "Incoming messages by kind (crawl, action, ...) and outcome",
    ["kind", "outcome"], registry=REGISTRY,
)  # fmt: skip

QUOTA_REFUSALS = Counter(
    "shoal_quota_refusals_total", "Requests refused at the edge (kafka monitor, REST): their app is over a quota",
    ["component", "appid", "quota"], registry=REGISTRY,
)  # fmt: skip

# --- Redis monitor ------------------------------------------------------------------------------
JOBS = Counter(
    "shoal_jobs_total", "Jobs handled by kind (action, stats, zookeeper, ...) and outcome", ["kind", "outcome"],
    registry=REGISTRY,
)  # fmt: skip
LEASES_REAPED = Counter(
    "shoal_leases_reaped_total", "Expired leases put back in their queue by the reaper", ["spiderid"],
    registry=REGISTRY,
)  # fmt: skip
CRAWLS_ENDED = Counter(
    "shoal_crawls_ended_total", "Crawls that ended, by how (finished, stopped, expired)", ["how"],
    registry=REGISTRY,
)  # fmt: skip

# --- REST ---------------------------------------------------------------------------------------
REST_REQUESTS = Counter(
    "shoal_rest_requests_total", "HTTP requests answered by the gateway", ["method", "route", "status"],
    registry=REGISTRY,
)  # fmt: skip
REST_SECONDS = Histogram(
    "shoal_rest_request_duration_seconds", "Time to answer one HTTP request", ["route"],
    buckets=_LATENCY_BUCKETS, registry=REGISTRY,
)  # fmt: skip


class CollectorSlot:
    """One collector of a kind in REGISTRY at a time: registering again replaces the earlier one
    (a component that rebuilds its clients, or tests that build many, never exports a family twice)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[Any] = []

    def replace(self, collector: Any) -> None:
        with self._lock:
            self._clear()
            REGISTRY.register(collector)
            self._held.append(collector)

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        while self._held:
            REGISTRY.unregister(self._held.pop())

