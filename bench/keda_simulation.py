"""KEDA on the polite capacity, simulated (issue 32): a backlog of due domains ramps from 0 to
100,000 and back; every polling interval KEDA reads shoal_scaling_recommended_replicas (computed by
utils/frontier/capacity.py's own formula) and sets desired = ceil(metric / target), scale-down held
back by the cooldown (the HPA's stabilization window). The crawl fetches min(allowed rate,
replicas x pages/s per crawler). For contrast, the same ramp under a queue-length trigger.

python -m bench.keda_simulation  ->  bench/results/keda_simulation.json
"""

from __future__ import annotations

import math
from collections import deque

from bench.common import print_checks, write_result
from utils.frontier.capacity import ScalingPolicy

STEP = 1.0  # seconds of simulated time per step
RAMP = 1800.0  # seconds from 0 to the peak, and back
HOLD = 600.0  # seconds at the peak
PEAK_DOMAINS = 100_000
REQUESTS_PER_DOMAIN = 50  # for the queue-length trigger's view of the same backlog
POLL = 15.0  # KEDA pollingInterval, seconds
COOLDOWN = 120.0  # scale-down stabilization, seconds
QUEUE_TARGET = 1000  # a queue-length trigger's requests per replica
POLICY = ScalingPolicy(hits=10, window=60, crawler_rate=80.0, render_rate=2.3, unthrottled_rate=80.0,
                       rate_window=120, bucket=60, heartbeat_ttl=120, min_replicas=1, max_replicas=1000)  # fmt: skip


def due_domains(t: float) -> int:
    if t < RAMP:
        return int(PEAK_DOMAINS * t / RAMP)
    if t < RAMP + HOLD:
        return PEAK_DOMAINS
    return max(int(PEAK_DOMAINS * (1 - (t - RAMP - HOLD) / RAMP)), 0)


def simulate() -> dict[str, float | int | bool]:
    per_domain = POLICY.domain_rate(POLICY.hits, POLICY.window)
    replicas = POLICY.min_replicas
    recent: deque[tuple[float, int]] = deque()  # (time, desired) within the cooldown
    fetched = ideal = 0.0
    late_up = over = 0
    peak_replicas = peak_queue_replicas = 0
    needed_at: deque[tuple[float, int]] = deque()  # the recommendation over the last poll + cooldown
    t = 0.0
    while t <= 2 * RAMP + HOLD:
        allowed = due_domains(t) * per_domain
        needed = POLICY.replicas(allowed, POLICY.crawler_rate)
        needed_at.append((t, needed))
        while needed_at and needed_at[0][0] < t - POLL - COOLDOWN - STEP:
            needed_at.popleft()
        if t % POLL == 0:  # KEDA reads the metric: desired = ceil(metric / target), target 1
            desired = math.ceil(needed / 1)
            recent.append((t, desired))
            while recent and recent[0][0] < t - COOLDOWN:
                recent.popleft()
            replicas = desired if desired >= replicas else max(d for _, d in recent)  # down only past the cooldown
            queue = due_domains(t) * REQUESTS_PER_DOMAIN
            peak_queue_replicas = max(peak_queue_replicas, min(math.ceil(queue / QUEUE_TARGET), 1000))
        lagged = [n for at, n in needed_at if at <= t - POLL]
        if lagged and replicas < lagged[-1]:
            late_up += 1  # not up to what was needed one polling interval ago
        if replicas > max(n for _, n in needed_at):
            over += 1  # more than politeness let the crawl use within poll + cooldown
        peak_replicas = max(peak_replicas, replicas)
        fetched += min(allowed, replicas * POLICY.crawler_rate) * STEP
        ideal += allowed * STEP
        t += STEP
    return {
        "peak_domains": PEAK_DOMAINS, "peak_allowed_pages_per_s": PEAK_DOMAINS * per_domain,
        "peak_replicas": peak_replicas, "peak_replicas_queue_length_trigger": peak_queue_replicas,
        "throughput_vs_polite_ideal": round(fetched / ideal, 4), "seconds_late_scaling_up": late_up,
        "seconds_over_polite_need": over, "polling_interval_s": POLL, "cooldown_s": COOLDOWN,
    }  # fmt: skip


def main() -> None:
    figures = simulate()
    for name, value in figures.items():
        print(f"{name:40} {value}")
    checks = {
        "replicas follow within one polling interval": figures["seconds_late_scaling_up"] == 0,
        "never more replicas than politeness can use": figures["seconds_over_polite_need"] == 0,
        "throughput >= 0.9 x the polite ideal": float(figures["throughput_vs_polite_ideal"]) >= 0.9,
    }
    print_checks(checks)
    write_result("keda_simulation", figures, checks)


if __name__ == "__main__":
    main()
