"""Signals between the Shoal crawler's components."""

from __future__ import annotations

# Sent by the pipeline when a leased request is done (page confirmed on Kafka, or dropped for
# good), with `lease` and `outcome`; the scheduler acks it in its next flush.
lease_settled = object()
