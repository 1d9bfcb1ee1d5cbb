"""The head of REPRODUCTION.md: the reproduction headline counted by basis, the trials rule,
the claims a reproduction target measured (decided, then smoke apart), and the other targets
compared with the paper's service in a table of their own (never counted).

The judging is `base.claims` and `base.basis`; this module only arranges their verdicts.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from fleetprobe.analysis.base import basis
from fleetprobe.analysis.base.claims import (
    COMPARISON,
    DIFFERS,
    HOLDS,
    NOT_COMPARABLE,
    NOT_MEASURED,
    REPRODUCED,
    REPRODUCTION,
    SMOKE_DIFFERS,
    SMOKE_SAME,
    STATUSES,
    Verdict,
    is_counted,
)
from fleetprobe.analysis.base.tables import Table, markdown

SMOKE = (SMOKE_SAME, SMOKE_DIFFERS)
# statuses that never count: on the page by claim, target, status and basis; every column
# (paper, measured, reason, runs) in tables/claims_not_counted.csv
NOT_COUNTED = (HOLDS, NOT_COMPARABLE)
NOT_COUNTED_TABLE = "claims_not_counted"
CLAIM_COLUMNS = ["claim", "target", "target kind", "paper", "measured", "n", "status", "basis",
                 "reason", "runs"]


def frame(judged: list[Verdict]) -> pd.DataFrame:
    """The verdicts as rows with the page's column names."""
    if not judged:
        return pd.DataFrame(columns=CLAIM_COLUMNS)
    rows = pd.DataFrame([asdict(v) for v in judged])
    rows["claim"] = rows.label + " (" + rows.section + ")"
    rows["runs"] = rows.run_ids.map(lambda ids: ", ".join(ids) or "-")
    rows["n"] = [str(int(n)) if n is not None and n == n else "-" for n in rows.n]
    return rows.rename(columns={"profile": "target", "target_kind": "target kind"})[
        CLAIM_COLUMNS]


def basis_counts(judged: list[Verdict]) -> pd.DataFrame:
    """Reproduction-role verdicts counted by basis (rows) and status (columns)."""
    mine = [v for v in judged if v.role == REPRODUCTION]
    rows = []
    for name in (*basis.BASES, basis.NO_BASIS):
        of = [v for v in mine if v.basis == name]
        if of:
            rows.append({"basis": name, **{s: sum(v.status == s for v in of)
                                           for s in STATUSES}, "total": len(of)})
    return pd.DataFrame(rows)


def headline(judged: list[Verdict]) -> str:
    """One sentence: what counts (measurements with enough trials), by basis, and what not."""
    counted = [v for v in judged if is_counted(v)]
    mine = [v for v in judged if v.role == REPRODUCTION]
    by = {b: (sum(v.basis == b and v.status == REPRODUCED for v in counted),
              sum(v.basis == b and v.status == DIFFERS for v in counted))
          for b in basis.REPRODUCING}
    parts = ", ".join(f"{b.removeprefix('measured: ')} {r} reproduced / {d} differs"
                      for b, (r, d) in by.items())
    design = {b: sum(v.basis == b and v.status == HOLDS for v in mine) for b in basis.BY_DESIGN}
    return (
        f"**Reproduction headline: {sum(v.status == REPRODUCED for v in counted)} reproduced, "
        f"{sum(v.status == DIFFERS for v in counted)} differs** (measurements with enough "
        f"trials on a target that can reproduce the claim; {parts}). Not counted: "
        f"{sum(design.values())} hold by design ("
        + ", ".join(f"{b} {n}" for b, n in design.items())
        + f"), {sum(v.basis in basis.BY_DESIGN and v.status == DIFFERS for v in mine)} "
        "differ by design (the workload or the simulator's rule gives another number), "
        f"{sum(v.status in SMOKE for v in mine)} smoke (too few trials), "
        f"{sum(v.status == NOT_COMPARABLE for v in mine)} not comparable, "
        f"{sum(v.status == NOT_MEASURED for v in mine)} not measured; "
        f"{sum(v.role == COMPARISON for v in judged)} comparisons of other targets with the "
        "paper's service, in their own table.")


VOCABULARY = (
    "Statuses: `reproduced` / `differs`: a measurement (basis `measured: ...`) on a target "
    "that can reproduce the claim (the bundled profile the claim names, MemClaw's engine at "
    "the commit that profile stands for, a live endpoint), with enough trials; rates are the "
    "same when the paper's and the measured 95% Wilson intervals overlap. `smoke: same` / "
    "`smoke: differs`: the same comparison with too few trials. `holds by design`: the "
    "number is fixed by the workload's construction or by the simulator's own rule, so it "
    "is no evidence about MemClaw. Bases: `measured: MemClaw's engine` (MemClaw's code, "
    "started by the kit), `measured: live endpoint`, `measured: bundled profile` (the "
    "bundled server where the kit states no rule that gives the number), `simulator's rule`, "
    "`workload construction` (analysis/base/basis.py). Each claim is compared with the "
    "canonical run for its experiment and target (latest complete run at paper scale with "
    "the paper's configuration, paper_values.yaml `headline_params`, unless runs were "
    "selected explicitly).")


def head(judged: list[Verdict], paper: dict[str, Any]) -> str:
    mine = [v for v in judged if v.role == REPRODUCTION]
    decided = [v for v in mine if v.status not in (*SMOKE, *NOT_COUNTED)]
    held = [v for v in mine if v.status in NOT_COUNTED]
    smoke = [v for v in mine if v.status in SMOKE]
    lines = ["# Paper versus reproduction", "",
             "Generated from the traces by `fleetprobe.analysis`.", "",
             headline(judged), "",
             "Reproduction targets by basis and status:", "",
             markdown(basis_counts(judged)), "",
             basis.trials_rule(paper), "", VOCABULARY, "",
             markdown(frame(decided)), ""]
    if held:
        lines += [f"### Holding by design or not comparable: {len(held)} claims, never counted",
                  "", f"Every column of these rows (paper, measured, reason, runs): "
                  f"`tables/{NOT_COUNTED_TABLE}.csv`.", "",
                  markdown(frame(held)[["claim", "target", "status", "basis"]]), ""]
    if smoke:
        lines += ["### Smoke: measurements with too few trials to decide", "",
                  "Shown apart and never counted (the trials rule above).", "",
                  markdown(frame(smoke)), ""]
    lines += comparison_summary(judged)
    return "\n".join(lines)


def comparison_summary(judged: list[Verdict]) -> list[str]:
    """Per other target, its comparisons with the paper's service counted by status; the
    rows are in tables/comparisons.csv."""
    others = [v for v in judged if v.role == COMPARISON]
    lines = ["## Other targets against the paper's service", ""]
    if not others:
        return lines + ["_no other target label in the traces._", ""]
    rows = pd.DataFrame([{"target": v.profile, "target kind": v.target_kind,
                          "status": v.status} for v in others])
    counts = rows.groupby(["target", "target kind", "status"]).size().unstack(fill_value=0)
    return lines + [
        "Backends, other engines, and bundled profiles or engines of another date than the "
        "claim's are compared with the paper's service (`same as paper's service` / "
        "`differs from paper's service`, `(smoke)` below the trials rule), never judged "
        "reproduced and never counted in the headline. Counts per target; every row, with "
        "its reason, is in tables/comparisons.csv.", "",
        markdown(counts.reset_index()), ""]


def comparisons(judged: list[Verdict]) -> Table:
    """Every comparison of another target with the paper's service (the CSV the page cites)."""
    rows = frame([v for v in judged if v.role == COMPARISON])
    return Table("comparisons", "Other targets against the paper's service", rows,
                 "Backends, other engines and other bundled profiles compared with the "
                 "paper's service; never counted as reproductions.", formats=("csv",))


def not_counted_table(judged: list[Verdict]) -> Table:
    """The reproduction-role verdicts that hold by design or are not comparable, whole."""
    held = [v for v in judged if v.role == REPRODUCTION and v.status in NOT_COUNTED]
    return Table(NOT_COUNTED_TABLE, "Claims holding by design or not comparable (never "
                 "counted)", frame(held))
