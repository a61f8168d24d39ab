"""bench/keda_simulation.py's claims (issue 32): under KEDA's formula and cooldown, the crawler
count that follows shoal_scaling_recommended_replicas tracks a ramp of 0 -> 100,000 due domains
and back, never exceeds what politeness can use, and fetches within 10 % of the polite ideal."""

from __future__ import annotations

from bench.keda_simulation import simulate


def test_replicas_follow_the_polite_capacity_and_throughput_stays_near_the_ideal() -> None:
    figures = simulate()

    assert figures["peak_replicas"] == 209  # ceil(100,000 x 10/60 / 80)
    assert figures["peak_replicas_queue_length_trigger"] > 4 * figures["peak_replicas"]
    assert figures["seconds_late_scaling_up"] == 0
    assert figures["seconds_over_polite_need"] == 0
    assert figures["throughput_vs_polite_ideal"] >= 0.9
