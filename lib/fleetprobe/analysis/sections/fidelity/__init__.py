"""Fidelity: each bundled profile against the engine it stands for (issues 21, 34).

Pairs (`paper_values.yaml` `fidelity.pairs`): `memclaw-2026-05-30` against e2d805e (the code of
the paper's day), `memclaw-2026-05-31` against 045039f (the remediation), `memclaw-2.29`
against b65ecbe. For every pair of matrix runs with the same params (cells.py), the cells
agreeing; a profile's choices may be fitted on one world and seed (`fidelity.fitted`), so the
headline gives the fitted and the held-out runs apart. Then the paper's claims and the
separation rates, profile against engine (claims.py).

Written to reports/FIDELITY.md and reports/tables/fidelity_*.{csv,md,tex}.
"""

from __future__ import annotations

import pandas as pd

from fleetprobe.analysis.base.claims import NOT_MEASURED
from fleetprobe.analysis.base.section import Context, SectionOutput, finish
from fleetprobe.analysis.base.tables import Table
from fleetprobe.analysis.sections.fidelity.cells import (
    compare_cells,
    order_dependent,
    probe_answers,
    repeats,
)
from fleetprobe.analysis.sections.fidelity.claims import (
    SEPARATION_VIEWS,
    claim_rows,
    dynamics_rows,
    separation_rows,
)
from fleetprobe.analysis.sections.fidelity.document import document, experiment_lines, run_row
from fleetprobe.analysis.sections.fidelity.pairs import Pair, pairs

KEY, TITLE = "fidelity", "Fidelity (engine)"
# the experiments whose runs it reads
EXPERIMENTS = ("matrix", "separation", "dynamics", "leakage", "contradiction", "provenance",
               "propagation")
DOCUMENT = "FIDELITY.md"
NOT_YET = ("Not measured: the traces hold no matrix run against an engine commit with a run of "
           "its bundled profile under the same params beside it "
           "(`python -m fleetprobe reproduce params/fidelity.yaml`, docs/engine.md).")


def _claims(results, pair: Pair) -> pd.DataFrame:  # noqa: ANN001 - Results
    """The pair's claims under the profile label whose runs measure the most of them (the
    matrix twin's `... headers` label measures the matrix claims only, the bare profile's
    canonical runs the paper's experiments)."""
    best = pd.DataFrame()
    for label in dict.fromkeys((pair.profile_run.profile, pair.profile)):
        rows = claim_rows(results, label, pair.engine_run.profile)
        measured = int((~rows.profile.str.startswith(NOT_MEASURED)).sum()) if len(rows) else 0
        if measured and (best.empty or measured > int(
                (~best.profile.str.startswith(NOT_MEASURED)).sum())):
            best = rows.assign(pair=pair.name, profile_label=label)
    return best


def _claims_only(results, profiles: dict[str, str],  # noqa: ANN001 - Results
                 done: set[str]) -> list[pd.DataFrame]:
    """The claims of each pair with no matrix pair (e.g. the remediation, 045039f): its
    profile's canonical runs beside the latest engine run at its commit."""
    found = []
    engines = results.runs[results.runs.target_kind == "engine"].sort_values("run_id")
    for commit, profile in profiles.items():
        at = engines[engines.engine_commit.fillna("").str.startswith(commit)]
        if profile in done or at.empty:
            continue
        rows = claim_rows(results, profile, at.profile.iloc[-1])
        if not rows.empty:
            found.append(rows.assign(pair=f"{profile} vs {commit}", profile_label=profile))
    return found


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    settings = results.paper.get("fidelity") or {}
    profiles, fitted = settings.get("pairs") or {}, settings.get("fitted") or {}
    try:
        matrix_pairs = pairs(results.runs, "matrix", profiles, fitted)
        if not matrix_pairs:
            return finish(SectionOutput(KEY, TITLE, NOT_YET), context)
        rows, cells, diffs = [], [], []
        for pair in matrix_pairs:
            answers = probe_answers(results.con, pair.profile_run.run_id)
            flaky = order_dependent(results.con, answers,
                                    repeats(results.runs, pair.profile_run, pair.profile))
            c, d = compare_cells(answers, probe_answers(results.con, pair.engine_run.run_id),
                                 flaky)
            key = {"pair": pair.name, "seed": int(pair.engine_run.seed or 0),
                   "fitted": "fitted" if pair.fitted else "held out"}
            rows.append(run_row(pair, c, d))
            cells.append(c.assign(**key))
            diffs.append(d.assign(**key))
        per_pair = {p.profile: p for p in matrix_pairs}.values()
        claims = pd.concat([_claims(results, p) for p in per_pair]
                           + _claims_only(results, profiles, {p.profile for p in per_pair})
                           or [pd.DataFrame()], ignore_index=True)
        sep = pairs(results.runs, "separation", profiles, fitted)
        separations = [separation_rows(results, x.profile_run.run_id, x.engine_run.run_id)
                       .assign(pair=x.name, fitted=x.fitted) for x in sep]
        separation = separations[0].drop(columns=["pair", "fitted"]) if sep else pd.DataFrame()
        dyn = pairs(results.runs, "dynamics", profiles, fitted)
        dynamics = [dynamics_rows(results, x.profile_run.run_id, x.engine_run.run_id)
                    .assign(pair=x.name, fitted=x.fitted) for x in dyn]
    finally:
        results.con.close()
    runs_table = pd.DataFrame(rows)
    cells_table = pd.concat(cells, ignore_index=True)
    diffs_table = pd.concat(diffs, ignore_index=True)
    lines = experiment_lines(runs_table, claims, separations, dynamics)
    text = document(runs_table, diffs_table, claims, separation, sep[0] if sep else None, lines)
    tables = {t.name: t for t in (
        Table("fidelity_headline", "Fidelity: each experiment per pair, fitted and held out",
              lines),
        Table("fidelity_runs", "Fidelity: each pair of runs, cells agreeing", runs_table),
        Table("fidelity_cells", "Fidelity: matrix cells, profile vs engine", cells_table),
        Table("fidelity_differences", "Fidelity: differing probes", diffs_table,
              note="no differing probe"),
        Table("fidelity_claims", "Fidelity: paper claims, profile vs engine", claims,
              note="no claim measured under both labels"),
        Table("fidelity_dynamics", "Fidelity: dynamics rates (MGS parts), profile vs engine",
              pd.concat(dynamics or [pd.DataFrame()], ignore_index=True),
              note="no dynamics runs of the same params under both targets"))}
    headline = "; ".join(f"{r['pair']} {r['experiment']}: fitted {r['fitted']}, held out "
                         f"{r['held out']}" for r in lines.to_dict("records"))
    sentence = ("Each bundled profile against the engine it stands for, the matrix cell by "
                f"cell ({headline}), then the paper's claims side by side. Full text: "
                "FIDELITY.md.")
    runs = tuple(sorted({r.run_id for p in [*matrix_pairs, *sep, *dyn]
                         for r in (p.profile_run, p.engine_run)}))
    output = SectionOutput(KEY, TITLE, sentence, tables=tables,
                           files={DOCUMENT: text.encode()}, runs=runs,
                           views=("matrix_verdicts", "dynamics_mgs_parts",
                                  *SEPARATION_VIEWS),
                           data={"cells": cells_table, "differences": diffs_table})
    return finish(output, context)
