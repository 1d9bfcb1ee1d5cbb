"""Client-side pacing: keep each request class below the server's rate limit.

A virtual-clock token bucket (GCRA): each acquire reserves the next free slot, so callers
are spaced at `1/rate` seconds with at most `burst` requests let through back to back.
Reserving before sleeping keeps the order fair under concurrency without a background task.
"""

from __future__ import annotations

import asyncio
import time


class Pacer:
    """Spaces calls at `rate_per_s`; `rate_per_s=None` means unthrottled."""

    def __init__(self, rate_per_s: float | None, burst: int = 1) -> None:
        if rate_per_s is not None and rate_per_s <= 0:
            raise ValueError(f"pacing rate must be positive or None, got {rate_per_s}")
        if burst < 1:
            raise ValueError(f"pacing burst must be >= 1, got {burst}")
        self.rate_per_s = rate_per_s
        self.burst = burst
        self._next_free = 0.0  # theoretical arrival time of the next request (monotonic s)

    @property
    def throttled(self) -> bool:
        return self.rate_per_s is not None

    def reserve(self, now: float) -> float:
        """Reserve a slot at or after `now`; return how long the caller must wait."""
        if self.rate_per_s is None:
            return 0.0
        interval = 1.0 / self.rate_per_s
        earliest = self._next_free - (self.burst - 1) * interval
        start = max(now, earliest)
        self._next_free = max(self._next_free, now) + interval
        return start - now

    async def acquire(self) -> None:
        delay = self.reserve(time.monotonic())
        if delay > 0:
            await asyncio.sleep(delay)


class PacerSet:
    """One pacer per request class (`write`, `bulk`, `search`); unknown classes are unpaced."""

    def __init__(self, rates: dict[str, float | None] | None = None) -> None:
        self.rates = dict(rates or {})
        self._pacers = {name: Pacer(rate) for name, rate in self.rates.items()}

    def fresh(self) -> PacerSet:
        """The same rates, its own buckets (for a tenant with rate limits of its own)."""
        return PacerSet(self.rates)

    def get(self, request_class: str | None) -> Pacer | None:
        return self._pacers.get(request_class) if request_class else None

    async def acquire(self, request_class: str | None) -> None:
        pacer = self.get(request_class)
        if pacer is not None:
            await pacer.acquire()
