"""The matrix section's names, orders and labels (shared by its tables and its heatmap)."""

from __future__ import annotations

from fleetprobe.analysis.base.labels import OTHER_FAMILY, PATH_FAMILIES
from fleetprobe.oracle.policy import PATHS

KEY, TITLE = "matrix", "Governance matrix"
EXPERIMENTS = ("matrix",)
TABLES = ("matrix_summary", "matrix_cross_tenant", "matrix_paper_rates", "matrix_not_applicable",
          "matrix_na_reasons", "matrix_oracles", "matrix_side_effects", "matrix_entity_census",
          "matrix_agent_drift", "matrix_gaps", "matrix_seed_spread", "matrix_hardened_zero")
# the views load() reads per canonical run (matrix_canonical picks the runs)
RUN_VIEWS = ("matrix_summary", "matrix_cells", "matrix_gap_catalogue", "matrix_cross_tenant",
             "matrix_paper_rates", "matrix_not_applicable", "matrix_na_reasons",
             "matrix_oracles", "matrix_side_effects", "matrix_entity_census",
             "matrix_agent_drift")
VIEWS = ("matrix_canonical", *RUN_VIEWS, "matrix_seed_runs", "matrix_seed_cells",
         "matrix_seed_totals")

NO_RUNS = ("No matrix runs yet: run `python -m fleetprobe batch params/extended.yaml` (every "
           "profile at full scale) or `PROFILE=hardened make run-matrix` (one profile), then "
           "`make report`.")
RELATIONS = ("own", "same_fleet", "other_fleet", "null_fleet", "homeless")
# the checker's labels (experiments/matrix/check.py principal_label): an agent id nobody
# registered is `unregistered <relation>`
PRINCIPALS = ("tenant key", *(f"t{t} {rel}" for t in range(4) for rel in RELATIONS),
              *(f"unregistered {rel}" for rel in RELATIONS), "other tenant")
PATH_ORDER = tuple(PATHS)
# the heatmap's columns and file (PNG only: the page and the notebook show it, nothing reads a
# PDF of it); here, not in `figure`, so the tables and pages need no matplotlib
FAMILIES = (*(name for name, _ in PATH_FAMILIES), OTHER_FAMILY)
HEATMAP_FILE = "matrix_heatmap.png"
PROFILE_ORDER = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "hardened", "naive",
                 "memclaw-2.29")


def _label(profile: str | None, target_kind: str | None) -> str:
    """The run's target label (the `runs` view's profile column is the label)."""
    return profile or f"unknown {target_kind or 'target'}"


def order(labels: list[str]) -> list[str]:
    rank = {p: i for i, p in enumerate(PROFILE_ORDER)}
    return sorted(labels, key=lambda s: (rank.get(s, len(rank)), s))


def cell_text(gaps: int, n: int, misses: int) -> str:
    """A heatmap or grid cell: `gaps/n` (and `+k m` for misses); `-` where nothing was
    judged."""
    if n == 0:
        return "-"
    return f"{gaps}/{n}" + (f" +{misses}m" if misses else "")
