"""Moving-window rate limits with slowapi's wording (`"10 per 1 second"`)."""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass

from ..wire.errors import ApiError

_UNITS = {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*(?:/|per)\s*(?:(\d+)\s*)?(second|minute|hour|day)s?\s*$")


@dataclass(frozen=True)
class Rate:
    amount: int
    multiple: int
    unit: str

    @property
    def window_s(self) -> float:
        return self.multiple * _UNITS[self.unit]

    def __str__(self) -> str:  # the limits library's wording, as in MemClaw's 429
        return f"{self.amount} per {self.multiple} {self.unit}"

    @property
    def spec(self) -> str:
        return f"{self.amount}/{self.unit}" if self.multiple == 1 else str(self)


def parse_rate(text: str) -> Rate:
    """`"10/second"`, `"100/minute"`, `"100 per 1 minute"`."""
    m = _RATE.match(text)
    if not m or int(m.group(1)) < 1:
        raise ValueError(f"bad rate {text!r}: expected e.g. '10/second' or '100/minute'")
    return Rate(int(m.group(1)), int(m.group(2) or 1), m.group(3))


@dataclass(frozen=True)
class Window:
    """One bucket's moving window after a hit: its limit, what is left, and how long until
    the oldest hit leaves it (a refused caller's Retry-After)."""

    limit: int
    remaining: int
    reset_after_s: float


class RateLimited(ApiError):
    def __init__(self, rate: Rate, window: Window) -> None:
        super().__init__(429, f"Rate limit exceeded: {rate}. Try again later.")
        self.window = window


class RateLimiter:
    """One moving window per (bucket, caller key)."""

    def __init__(self, rates: dict[str, Rate]) -> None:
        self.rates = rates
        self._hits: dict[tuple[str, str], deque[float]] = {}

    def hit(self, bucket: str, key: str) -> Window:
        """Counts one request; raises `RateLimited` (429) when the window is full."""
        rate = self.rates[bucket]
        now = time.monotonic()
        hits = self._hits.setdefault((bucket, key), deque())
        while hits and hits[0] <= now - rate.window_s:
            hits.popleft()
        if len(hits) >= rate.amount:
            raise RateLimited(rate, Window(rate.amount, 0, hits[0] + rate.window_s - now))
        hits.append(now)
        return Window(rate.amount, rate.amount - len(hits), hits[0] + rate.window_s - now)
