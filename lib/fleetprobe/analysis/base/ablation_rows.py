"""One row per run of an experiment beside its ablations: identity, role, knobs and rates.

The provenance section (pacing) and the contradiction section (prose and writer knobs) each
build their rows with `runs_of` and `run_row`; every number comes from the metric views
through `Results`, the knobs from the run's manifest params.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from fleetprobe.analysis.base.results import ABLATION, PROFILES, Results
from fleetprobe.analysis.base.stats import Rate


@dataclass
class RunRow:
    """One run of an ablation table: identity and role, the knobs, the measured rates."""

    run_id: str
    profile: str
    role: str
    differs: str
    knobs: dict[str, str]
    rates: dict[str, Rate | None]
    rejections: dict[str, int] = field(default_factory=dict)


def runs_of(results: Results, experiment: str) -> pd.DataFrame:
    """Complete paper-scale runs (else the fallbacks of comparison_runs) plus selected ones,
    in profile order, headline before ablation, oldest first."""
    runs = results.comparison_runs(experiment, keep_unselected=True).copy()
    profile_order = {p: i for i, p in enumerate(PROFILES)}
    runs["profile_order"] = runs.profile.map(lambda p: profile_order.get(p, len(PROFILES)))
    runs["is_ablation"] = runs.role == ABLATION
    runs["order"] = runs.started_at.fillna("") + runs.run_id
    return runs.sort_values(["profile_order", "profile", "is_ablation", "order"])


def run_row(results: Results, run, knobs: dict[str, str], metrics: tuple[str, ...]) -> RunRow:
    return RunRow(run.run_id, run.profile, role(results, run), run.differs, knobs,
                  {m: results.measured_rate(m, run.run_id) for m in metrics})


def role(results: Results, run) -> str:
    canonical = results.canonical_run(run.experiment, run.profile)
    is_canonical = canonical is not None and canonical.run_id == run.run_id
    if run.role == ABLATION:
        return f"{ABLATION} (selected)" if is_canonical else ABLATION
    return "headline" if is_canonical else "headline config, not canonical"


def count_of(measured: Rate | None) -> int | str:
    return "-" if measured is None else measured.k
