"""Wilson intervals against the paper's own printed values (DESIGN.md, issue 2 item 8)."""

from __future__ import annotations

import math

import pytest

from fleetprobe.analysis.base.stats import rate, wilson

PAPER_INTERVALS = [
    (50, 50, (0.929, 1.000)),
    (164, 164, (0.977, 1.000)),
    (72, 164, (0.365, 0.516)),
    (4, 28, (0.057, 0.315)),
    (0, 36, (0.000, 0.096)),
    (117, 120, (0.929, 0.991)),
    (0, 80, (0.000, 0.046)),
    (98, 200, (0.422, 0.559)),
    (90, 90, (0.959, 1.000)),
    (0, 28, (0.000, 0.121)),
]


@pytest.mark.parametrize(("k", "n", "expected"), PAPER_INTERVALS)
def test_wilson_matches_the_paper_to_three_decimals(k, n, expected):
    low, high = wilson(k, n)
    assert (round(low, 3), round(high, 3)) == expected


def test_no_trials_gives_an_undefined_interval_not_an_error():
    low, high = wilson(0, 0)
    assert math.isnan(low) and math.isnan(high)
    assert math.isnan(rate(0, 0).value)


def test_impossible_counts_are_refused():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson(5, 4)


def test_interval_overlap():
    assert rate(72, 164).overlaps(rate(80, 164))
    assert not rate(72, 164).overlaps(rate(0, 164))
    assert not rate(0, 0).overlaps(rate(0, 10))


def test_one_minus_product_holds_jointly_and_leaves_out_parts_with_no_trials():
    from fleetprobe.analysis.base.stats import one_minus_product, wilson

    product = one_minus_product([(2, 40), (0, 100), (0, 0)])
    assert product.parts == 2  # the part with no trials is not applicable
    assert product.value == pytest.approx((1 - 2 / 40) * 1.0)
    # each measured part at 1 - 0.05/2, the product's bounds from the parts' bounds
    lo1, hi1 = wilson(2, 40, 0.975)
    lo2, hi2 = wilson(0, 100, 0.975)
    assert product.low == pytest.approx((1 - hi1) * (1 - hi2))
    assert product.high == pytest.approx((1 - lo1) * (1 - lo2))
    assert product.low < product.value <= product.high
    assert one_minus_product([(2, 40)]).low > product.low  # one part: a narrower interval
    assert one_minus_product([(0, 0)]).parts == 0
