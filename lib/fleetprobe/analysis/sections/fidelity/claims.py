"""The paper's claims, the separation rates and the dynamics rates, profile against engine:
each label's outcome against the paper (analysis/base/claims.py) side by side (the statuses
differ by basis, so the outcomes are compared), and each rate by Wilson overlap.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fleetprobe.analysis.base.claims import judge
from fleetprobe.analysis.base.stats import fmt_rate, rate

SEPARATION_VIEWS = ("separation_contamination", "separation_restricted_records",
                    "separation_absence", "separation_attribution", "separation_reserved",
                    "separation_insight_read", "separation_underlying_read")


def claim_rows(results: Any, profile_label: str, engine_label: str) -> pd.DataFrame:
    rows = []
    for claim in results.claims:
        p, e = judge(results, claim, profile_label), judge(results, claim, engine_label)
        if p.status == "not measured" and e.status == "not measured":
            continue
        same = p.outcome == e.outcome
        rows.append({"claim": claim["id"], "section": claim["section"],
                     "paper": p.paper, "profile": f"{p.outcome} ({p.status}): {p.measured}",
                     "engine": f"{e.outcome} ({e.status}): {e.measured}",
                     "same outcome": "yes" if same else "no",
                     "engine's reason": e.reason if not same else ""})
    return pd.DataFrame(rows)


def separation_rows(results: Any, profile_run: str, engine_run: str) -> pd.DataFrame:
    rows = []
    for view in SEPARATION_VIEWS:
        frame = results.view(view, [profile_run, engine_run])
        keys = [c for c in frame.columns if c not in (
            "run_id", "numerator", "denominator", "hold_visible", "summary_named",
            "misattributed", "stored")]
        for group, part in frame.groupby(keys, sort=True) if keys else [((), frame)]:
            by = part.set_index("run_id")
            if profile_run not in by.index or engine_run not in by.index:
                continue
            p, e = (rate(int(by.numerator[r]), int(by.denominator[r]))
                    for r in (profile_run, engine_run))
            if p.n == 0 and e.n == 0:
                continue
            where = ", ".join(f"{k}={v}" for k, v in zip(
                keys, group if isinstance(group, tuple) else (group,), strict=True))
            agree = p.overlaps(e)
            rows.append({"metric": view.removeprefix("separation_") + (
                f" ({where})" if where else ""), "profile": fmt_rate(p), "engine": fmt_rate(e),
                "agree": "yes" if agree else "no",
                "what each answered": "" if agree else separation_flags(
                    results, view, profile_run, engine_run)})
    return pd.DataFrame(rows)


# the per-answer flags a separation rate is made of (events of its phase), for a difference
SEPARATION_FLAGS = {
    "separation_reserved": ("reserved_check", ("refused", "envelope_ok", "names_route",
                                               "stored")),
    "separation_attribution": ("attribution", ("sales_named", "legal_named")),
}


def separation_flags(results: Any, view: str, profile_run: str, engine_run: str) -> str:
    """Each side's count of every flag the differing rate is made of (from its events)."""
    if view not in SEPARATION_FLAGS:
        return ""
    phase, flags = SEPARATION_FLAGS[view]
    sides = []
    for side, run in (("profile", profile_run), ("engine", engine_run)):
        counts = results.con.execute(
            "SELECT count(*), " + ", ".join(
                f"count(*) FILTER (WHERE CAST({f} AS BOOLEAN))" for f in flags)
            + " FROM events WHERE run_id = ? AND experiment = 'separation' AND phase = ?",
            [run, phase]).fetchone()
        sides.append(f"{side}: " + ", ".join(f"{f} {k}/{counts[0]}" for f, k in zip(
            flags, counts[1:], strict=True)))
    return "; ".join(sides)


# the dynamics rates of MGS (metrics.sql dynamics_mgs_parts): (name, numerator, denominator)
DYNAMICS_PARTS = (("miss", "miss_k", "miss_n"), ("leak", "leak_k", "leak_n"),
                  ("forget failure", "forget_k", "forget_n"))


def dynamics_rows(results: Any, profile_run: str, engine_run: str) -> pd.DataFrame:
    """Each part of MGS on both runs, agreeing when the 95% Wilson intervals overlap."""
    frame = results.view("dynamics_mgs_parts", [profile_run, engine_run]).groupby(
        "run_id").sum(numeric_only=True)
    if profile_run not in frame.index or engine_run not in frame.index:
        return pd.DataFrame()
    rows = []
    for name, k, n in DYNAMICS_PARTS:
        p, e = (rate(int(frame.at[r, k]), int(frame.at[r, n])) for r in (profile_run, engine_run))
        rows.append({"metric": name, "profile": fmt_rate(p), "engine": fmt_rate(e),
                     "agree": "yes" if p.overlaps(e) else "no"})
    return pd.DataFrame(rows)
