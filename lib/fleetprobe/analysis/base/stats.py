"""95% Wilson score intervals, from scipy rather than hand-rolled."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    """k successes out of n trials, with its 95% Wilson interval (NaN when n is 0)."""

    k: int
    n: int
    value: float
    low: float
    high: float

    def overlaps(self, other: Rate) -> bool:
        """Whether the two intervals share a point; False when either is undefined."""
        if self.n == 0 or other.n == 0:
            return False
        return self.low <= other.high and other.low <= self.high


@functools.lru_cache(maxsize=4096)
def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for k of n; (nan, nan) when there were no trials. Cached:
    the report asks for the same few (k, n) hundreds of times, and binomtest computes an
    exact p-value on the way."""
    if n == 0:
        return (math.nan, math.nan)
    if not 0 <= k <= n:
        raise ValueError(f"a rate needs 0 <= k <= n, got k={k}, n={n}")
    # imported here: the report's composing process computes no interval and need not
    # import scipy.stats
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def rate(k: int, n: int) -> Rate:
    """k of n as a Rate with its Wilson interval."""
    low, high = wilson(k, n)
    return Rate(int(k), int(n), k / n if n else math.nan, low, high)


@dataclass(frozen=True)
class Product:
    """prod(1 - rate_i) over the parts with trials, and its interval: each part's Wilson
    interval at confidence 1 - (1 - level)/m (Bonferroni over the m parts with trials), so
    the product's interval [prod(1 - high_i), prod(1 - low_i)] holds with at least `level`.
    A part with no trials is not applicable: it is left out (a factor of 1, no width)."""

    value: float
    low: float
    high: float
    parts: int  # the parts with trials
    level: float = 0.95


def one_minus_product(parts: list[tuple[int, int]], level: float = 0.95) -> Product:
    """Product of (1 - k/n) over the (k, n) parts with n > 0, with its joint interval."""
    measured = [(int(k), int(n)) for k, n in parts if int(n) > 0]
    if not measured:
        return Product(math.nan, math.nan, math.nan, 0, level)
    each = 1 - (1 - level) / len(measured)
    value = low = high = 1.0
    for k, n in measured:
        lo, hi = wilson(k, n, each)
        value *= 1 - k / n
        low *= 1 - hi
        high *= 1 - lo
    return Product(value, low, high, len(measured), level)


def fmt_rate(r: Rate | None, with_value: bool = True) -> str:
    """`k/n = value [low, high]` (or `k/n [low, high]`); `-` when there is no rate."""
    if r is None:
        return "-"
    if r.n == 0:
        return "0/0"
    value = f" = {r.value:.3f}" if with_value else ""
    return f"{r.k}/{r.n}{value} [{r.low:.3f}, {r.high:.3f}]"


def fmt_count(r: Rate | None) -> str:
    return "-" if r is None else f"{r.k}/{r.n}"


def fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counts.items()) or "none"
