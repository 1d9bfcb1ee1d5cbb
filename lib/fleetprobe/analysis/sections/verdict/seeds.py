"""Between-seed spread (issue 36): each rate claim on its profile's headline run and on its
repeats (the paper's configuration on other seeds, role `repeat`), with the range of the
measured rate, the pooled rate and on how many seeds the rate is the same as the paper's. A
verdict that changes with the seed says so; the headline verdict stays the headline seed's."""

from __future__ import annotations

import pandas as pd

from fleetprobe.analysis.base.claims import claim_rate, experiment_of, paper_rate
from fleetprobe.analysis.base.results import REPEAT, Results
from fleetprobe.analysis.base.stats import Rate, fmt_rate, rate
from fleetprobe.analysis.base.tables import on_page

KINDS = ("rate", "admission")
NAME = "seed_spread"


def spread_frame(results: Results) -> pd.DataFrame:
    """One row per rate claim whose headline run has at least one complete repeat."""
    runs = results.runs[(results.runs.role == REPEAT) & results.runs.complete.astype(bool)]
    rows = []
    for claim in results.claims:
        if claim["kind"] not in KINDS:
            continue
        experiment, profile = experiment_of(claim), claim["profile"]
        headline = results.canonical_run(experiment, profile)
        repeats = runs[(runs.experiment == experiment) & (runs.profile == profile)]
        if headline is None or repeats.empty:
            continue
        measured: list[tuple[object, Rate]] = []
        for run in [headline, *(repeats.iloc[i] for i in range(len(repeats)))]:
            found = claim_rate(results, claim, run)
            if found is not None and found.n:
                measured.append((run.seed, found))
        if len(measured) < 2:
            continue
        paper = paper_rate(claim)
        same = [m.overlaps(paper) for _, m in measured]
        values = [m.value for _, m in measured]
        rows.append({
            "claim": claim["label"], "profile": profile, "seeds": len(measured),
            "per seed (seed: k/n)": ", ".join(f"{s}: {m.k}/{m.n}" for s, m in measured),
            "range": f"{min(values):.3f}-{max(values):.3f}",
            "pooled": fmt_rate(rate(sum(m.k for _, m in measured),
                                    sum(m.n for _, m in measured))),
            "paper": fmt_rate(paper),
            "same as paper on": f"{sum(same)}/{len(same)} seeds",
            "verdict changes with the seed": "yes" if len(set(same)) > 1 else "no"})
    return pd.DataFrame(rows)


def section(frame: pd.DataFrame) -> str:
    head = ["## Between-seed spread", ""]
    if frame.empty:
        return "\n".join([*head, "_No repeat runs (the paper's configuration on another "
                          "seed) in these traces: params/seeds.yaml makes them._", ""])
    changed = frame[frame["verdict changes with the seed"] == "yes"]
    fixed = frame["range"].map(lambda r: len(set(r.split("-"))) == 1).sum()
    return "\n".join([
        *head,
        "Each rate claim on its headline seed and on the repeats of the same configuration "
        "on other seeds (params/seeds.yaml): the measured rate's range over seeds, the pooled "
        "rate (all seeds' trials) and on how many seeds its 95% Wilson interval overlaps the "
        "paper's. The verdicts above are the headline seed's. "
        f"{fixed} of {len(frame)} claims give the same rate on every seed (on the bundled "
        "server the seed changes names and content, not the rules that decide these counts). "
        f"{len(changed)} of {len(frame)} claims change verdict with the seed"
        + (": " + "; ".join(f"{r.claim} ({r.profile})" for r in changed.itertuples())
           if not changed.empty else "") + ".", "",
        on_page(frame, NAME), ""])
