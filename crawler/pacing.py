"""What spaces two hits of a domain besides its throttle: robots.txt's Crawl-delay and the escalation
ladder's slow pace (crawler/ladder.py). Both land in the one `delay` of the domain's throttle state
(utils/frontier/lua/throttle_delay.lua, ladder_pace.lua), so whichever writes it writes the larger of
the two: a ladder step never lifts the site's own Crawl-delay, and a Crawl-delay rewrite never lifts
the ladder's pace."""

from __future__ import annotations

CRAWL_DELAY_TTL = 86400  # seconds a robots.txt Crawl-delay is kept in Redis (rewritten hourly)


def hit_spacing(crawl_delay: float, ladder_delay: float, ladder_hold: int) -> tuple[float, int]:
    """Seconds between two hits and how long they hold, from the domain's Crawl-delay (0 = none) and
    the ladder's pace (0 = none, held `ladder_hold`: also how long a level above 0 holds). With a
    Crawl-delay the spacing holds at least as long as it does: the ladder's hold running out, or a
    step back to 0, must not take the site's delay with it."""
    return max(crawl_delay, ladder_delay), max(CRAWL_DELAY_TTL, ladder_hold) if crawl_delay else ladder_hold
