"""FIDELITY.md: the headline per pair (fitted and held out apart), each pair of runs, the
differences grouped by cell and reason, the paper's claims and separation side by side. Long
tables (every cell, every differing probe) live in reports/tables/fidelity_*.csv.
"""

from __future__ import annotations

import pandas as pd

from fleetprobe.analysis.base.labels import describe_world
from fleetprobe.analysis.base.tables import markdown
from fleetprobe.analysis.sections.fidelity.pairs import Pair

TARGET_SHARE = 98.0  # the agreement a profile must reach on worlds it was not fitted on


def share(agreeing: int, total: int) -> str:
    return f"{agreeing}/{total} ({100.0 * agreeing / total:.1f}%)" if total else "0/0"


def run_row(pair: Pair, cells: pd.DataFrame, diffs: pd.DataFrame) -> dict:
    agreeing = int((cells.cell == "agree").sum())
    ordered = int(diffs.reason.str.startswith("order-dependent").sum()) if len(diffs) else 0
    return {"pair": pair.name, "profile": pair.profile, "engine": pair.commit,
            "seed": int(pair.engine_run.seed or 0),
            "world": describe_world(pair.engine_run.params),
            "fitted": "fitted" if pair.fitted else "held out",
            "cells agreeing": share(agreeing, len(cells)), "agreeing": agreeing,
            "cells": len(cells), "probes": int(cells.probes.sum()),
            "probes differing": len(diffs), "order-dependent": ordered,
            "engine run": pair.engine_run.run_id, "profile run": pair.profile_run.run_id}


def headline(runs: pd.DataFrame) -> pd.DataFrame:
    """Per pair: cells agreeing on the fitted runs and on the held-out runs (summed)."""
    rows = []
    for name, group in runs.groupby("pair", sort=False):
        row = {"pair": name}
        for kind in ("fitted", "held out"):
            part = group[group.fitted == kind]
            row[kind] = (share(int(part.agreeing.sum()), int(part.cells.sum()))
                         + f" over {len(part)} run(s)") if len(part) else "no run"
        held = group[group.fitted == "held out"]
        met = len(held) and 100.0 * held.agreeing.sum() / held.cells.sum() >= TARGET_SHARE
        row[f"held out >= {TARGET_SHARE:.0f}%"] = "yes" if met else "no"
        rows.append(row)
    return pd.DataFrame(rows)


HELD_OUT_NOTE = "paper's experiments (seed 7, the paper's world): never the fitted world"


def _agreeing(frames: list[pd.DataFrame], column: str, fitted: bool | None) -> str:
    """k/n rows agreeing over the frames of one kind (fitted or held out), "no run" when none."""
    chosen = [f for f in frames if not f.empty and (fitted is None or bool(f.fitted.iloc[0])
                                                     == fitted)]
    if not chosen:
        return "no run"
    rows = pd.concat(chosen, ignore_index=True)
    return f"{share(int((rows[column] == 'yes').sum()), len(rows))} over {len(chosen)} run(s)"


def experiment_lines(runs: pd.DataFrame, claims: pd.DataFrame, separations: list[pd.DataFrame],
                     dynamics: list[pd.DataFrame]) -> pd.DataFrame:
    """One line per pair and experiment (matrix cells, paper claims, separation, dynamics),
    agreement on the fitted and on the held-out runs apart: nothing shown further down
    disagrees without a line here."""
    rows = []
    names = dict.fromkeys([*runs.pair, *(claims.pair if "pair" in claims else [])])
    for name in names:
        group = runs[runs.pair == name]
        line = {"pair": name, "experiment": "matrix cells"}
        for kind in ("fitted", "held out"):
            part = group[group.fitted == kind]
            line[kind] = (share(int(part.agreeing.sum()), int(part.cells.sum()))
                          + f" over {len(part)} run(s)") if len(part) else "no run"
        rows.append(line)
        mine = claims[claims.pair == name] if "pair" in claims else pd.DataFrame()
        both = (mine[~mine.profile.str.startswith("not measured")
                     & ~mine.engine.str.startswith("not measured")] if len(mine) else mine)
        rows.append({"pair": name, "experiment": "paper claims (same outcome)",
                     "fitted": "no run", "held out": (
                         f"{share(int((both['same outcome'] == 'yes').sum()), len(both))} "
                         f"measured on both, {len(mine) - len(both)} on one side only "
                         f"({HELD_OUT_NOTE})") if len(mine) else "no run"})
        for experiment, frames in (("separation rates", separations),
                                   ("dynamics rates", dynamics)):
            of = [f for f in frames if not f.empty and f.pair.iloc[0] == name]
            rows.append({"pair": name, "experiment": experiment,
                         "fitted": _agreeing(of, "agree", True),
                         "held out": _agreeing(of, "agree", False)})
    return pd.DataFrame(rows, columns=["pair", "experiment", "fitted", "held out"])


def by_cell(diffs: pd.DataFrame) -> pd.DataFrame:
    """Differences grouped by pair, cell and reason: one line each, with one example."""
    if diffs.empty:
        return diffs
    frame = diffs.assign(why=[r.split(":")[0] for r in diffs.reason])
    grouped = (frame.groupby(["pair", "path", "principal", "visibility", "why"], sort=True)
               .agg(probes=("probe", "size"), seeds=("seed", lambda s: " ".join(
                   str(x) for x in sorted(set(s)))), example=("probe", "first"),
                    profile=("profile", "first"), engine=("engine", "first"))
               .reset_index())
    return grouped


def why_in_full(diffs: pd.DataFrame) -> list[str]:
    """The part of each reason the table cuts at its colon, once per distinct reason."""
    full = sorted({r for r in diffs.reason if ":" in r}) if not diffs.empty else []
    if not full:
        return []
    return ["Why, in full:", "", *(f"- {r.split(':')[0]}: {r.split(':', 1)[1].strip()}"
                                   for r in full), ""]


def document(runs: pd.DataFrame, diffs: pd.DataFrame, claims: pd.DataFrame,
             separation: pd.DataFrame, separation_pair: Pair | None,
             lines: pd.DataFrame) -> str:
    shown = runs.drop(columns=["agreeing", "cells", "profile", "engine"])
    lines = [
        "# Fidelity: each bundled profile against the engine it stands for", "",
        "The matrix: a bundled profile's run beside an engine commit's run with the same "
        "params apart from the target (seed, world, probes). A cell is (path, principal, row "
        "visibility); it agrees when every probe in it got the same verdict from both "
        "targets' checkers. A profile's engine-specific choices may be read off one world and "
        "seed (`fitted`, docs/profiles.md names each choice and the commit it was read from); "
        "agreement counts on the others (`held out`: other seeds, another world shape). "
        f"Target: at least {TARGET_SHARE:.0f}% of cells on held-out runs.", "",
        "## Headline", "",
        "Each experiment per pair, the fitted and the held-out runs apart: matrix cells "
        "agreeing, paper claims with the same outcome against the paper on both targets, "
        "separation and dynamics rates whose 95% Wilson intervals overlap.", "",
        markdown(lines), "",
        "Matrix cells against the target share:", "",
        markdown(headline(runs)), "",
        "## Every pair of runs", "", markdown(shown), "",
        "Every cell with each side's verdicts (e.g. `gap 2, ok 1`): "
        "`tables/fidelity_cells.csv`.", "",
        "## Differences by cell", "",
        "Each line: a cell of a pair where some probes differ, why (read from both answers), "
        "how many probes, on which seeds, and one example. Every differing probe with both "
        "answers: `tables/fidelity_differences.csv`; every cell: `tables/fidelity_cells.csv`.",
        "", markdown(by_cell(diffs)) if not diffs.empty else "_none_", "",
        *why_in_full(diffs),
        "## Paper claims, profile vs engine", "",
        "Each pair's profile (its canonical runs) and its engine commit (the paper's "
        "experiments on that code, params/paper-day.yaml and params/engine.yaml), claim by "
        "claim.", "",
        markdown(claims) if not claims.empty else "_no claim measured under both labels_", "",
        "## Separation, profile vs engine", ""]
    if separation_pair is not None:
        lines += [f"Runs: profile `{separation_pair.profile_run.run_id}`, engine "
                  f"`{separation_pair.engine_run.run_id}` ({separation_pair.name}); a rate "
                  "agrees when the 95% Wilson intervals overlap.", "",
                  markdown(separation) if not separation.empty else "_no rates_"]
    else:
        lines.append("_no separation runs of the same params under both targets_")
    return "\n".join(lines) + "\n"
