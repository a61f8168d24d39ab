"""Prometheus metrics of every Shoal component (issue 8): one registry per process, one /metrics each.

A component's entry point calls, once, after logging is set up:

    url = start_metrics_server(settings, "crawler")   # None when METRICS_ENABLED is off

and then the `record_*` / `set_*` helpers where the events happen (all label-bounded, no I/O).
The redis monitor also calls
`utils.frontier.metrics.register_frontier_collector(settings)` so that queue depth, in-flight
and the top-N domain backlogs are read from Redis at scrape time. `python -m utils.observability.metrics.health`
is the Docker health check. Metric names are listed in docs/reference/metrics.md (generated); the
dashboard is docker/grafana.
"""

from __future__ import annotations

from utils.observability.metrics.kafka_lag import set_consumer_lag, update_consumer_lag
from utils.observability.metrics.record import (
    is_healthy,
    mark_loop,
    observe_batch,
    record_block,
    record_crawl_ended,
    record_dead_letter,
    record_dropped,
    record_enqueued,
    record_incoming,
    record_job,
    record_leases_reaped,
    record_leases_returned,
    record_page,
    record_produced,
    record_quota_refusals,
    record_render,
    record_rest_request,
    record_retry,
    record_throttle_denials,
    set_browser_memory,
    set_dependency_up,
    status_label,
)
from utils.observability.metrics.registry import REGISTRY
from utils.observability.metrics.server import configure_process, metrics_url, start_metrics_server, stop_metrics_server

__all__ = [
    "REGISTRY",
    "configure_process",
    "is_healthy",
    "mark_loop",
    "metrics_url",
    "observe_batch",
    "record_crawl_ended",
    "record_dead_letter",
    "record_dropped",
    "record_enqueued",
    "record_incoming",
    "record_job",
    "record_leases_reaped",
    "record_leases_returned",
    "record_page",
    "record_produced",
    "record_quota_refusals",
    "record_render",
    "record_rest_request",
    "record_block",
    "record_retry",
    "record_throttle_denials",
    "set_browser_memory",
    "set_consumer_lag",
    "set_dependency_up",
    "start_metrics_server",
    "status_label",
    "stop_metrics_server",
    "update_consumer_lag",
]
