"""Each backend gap of the matrix, classified by a rule over its trace."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from fleetprobe.analysis.base.catalogues import catalogue  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.base.stats import fmt_rate, rate  # noqa: E402
from fleetprobe.analysis.base.tables import Table  # noqa: E402
from fleetprobe.analysis.sections.backends.common import (  # noqa: E402
    NO_MATRIX,
    _backend_matrix_runs,
    _matrix_probes,
    shown,
    target_info,
)

# ---- attribution: each backend gap of the matrix classified by a rule over its trace
# (metrics.sql backend_gap_classes; the counts per run and cause: backend_gap_class_counts)

BY_ID_PATHS = ("get", "patch", "patch_content", "delete")
# the public bugs the matrix measures by version, and what was listed as one but is a
# backend's documented behaviour (backend_promises_catalogue.yaml)
KNOWN_BUGS = catalogue("backend_promises")["known_bugs"]
NOT_BUGS = catalogue("backend_promises")["not_bugs"]
READ_PREFIXES = ("search", "list", "recall")


def gap_class_counts(results: Results, run_ids: list[str]) -> pd.DataFrame:
    """backend_gap_class_counts for these runs: run_id, profile, cause_rank, cause, gaps."""
    return results.con.execute(
        "SELECT * FROM backend_gap_class_counts WHERE list_contains(?::VARCHAR[], run_id) "
        "ORDER BY run_id, cause_rank", [run_ids]).df()


def attribution_tables(results: Results, traces_root: Path | None,
                       probes: pd.DataFrame | None = None) -> tuple[Table, Table]:
    """backends_gap_classes (per backend matrix run: gaps by class, checked to sum to the run's
    gap count in backend_matrix_counts) and backends_known_bugs (k/n per version of each known
    public bug the matrix reaches); `probes` as for `judged_probes`."""
    runs = _backend_matrix_runs(results)
    probes = _matrix_probes(results, list(runs.run_id)) if probes is None else probes.copy()
    if probes.empty:
        empty = pd.DataFrame()
        return (Table("backends_gap_classes", "Backend gaps by cause", empty, NO_MATRIX,
                      views=("backend_gap_class_counts",)),
                Table("backends_known_bugs", "Known public bugs, k/n by version", empty,
                      NO_MATRIX))
    label_of = dict(zip(runs.run_id, runs.profile, strict=False))
    classes = gap_class_counts(results, list(runs.run_id))
    classes["label"] = classes.run_id.map(label_of)
    counts = classes.pivot_table(index=["cause_rank", "cause"], columns="label", values="gaps",
                                 aggfunc="sum", fill_value=0)
    counts = counts.sort_index().droplevel("cause_rank")
    counts.columns.name = None
    _check_classes(results, counts, label_of)
    counts.loc["all gaps"] = counts.sum()
    table = Table("backends_gap_classes", "Backend gaps by cause (rule over each trace)",
                  counts.rename_axis("cause").reset_index(),
                  "Each gap of a backend's canonical matrix run gets the first cause whose "
                  "rule holds on its recorded request and the row's observed fleet and "
                  "visibility (metrics.sql `backend_gap_classes`); each column's causes sum to "
                  "`all gaps`, checked against the run's gap count (backend_matrix_counts) "
                  "when the table is built.",
                  views=("backend_gap_class_counts",))
    return table, known_bugs_table(probes, runs, traces_root)


def _check_classes(results: Results, counts: pd.DataFrame, label_of: dict[str, str]) -> None:
    """Every gap gets exactly one cause: the causes of each run sum to its gap count."""
    totals = results.view("backend_matrix_counts", list(label_of))
    totals = totals[totals.metric == "matrix_gap"]
    for run_id, label in label_of.items():
        expected = int(totals[totals.run_id == run_id].numerator.sum())
        got = int(counts[label].sum()) if label in counts.columns else 0
        if got != expected:
            raise ValueError(f"{label} ({run_id}): gap causes sum to {got}, the run has "
                             f"{expected} gaps (backend_matrix_counts)")


def known_bugs_table(probes: pd.DataFrame, runs: pd.DataFrame,
                     traces_root: Path | None) -> Table:
    """k/n per known public bug (backend_promises_catalogue.yaml's `known_bugs`) and version:
    the probes the bug could answer, and those that returned or changed the row; each row
    names the bug's public source and whether its text could be read here."""
    is_sibling = probes.prefix_sibling.fillna(False).astype(bool) \
        & probes.path.str.startswith(READ_PREFIXES)
    rows = []
    for run in runs.itertuples():
        info = target_info(traces_root, run.run_id)
        part = probes[(probes.run_id == run.run_id) & is_sibling]
        for bug in KNOWN_BUGS:
            if bug["backend"] != info["backend"]:
                continue
            rows.append({"bug": bug["bug"], "backend": info["backend"], "store": info["store"],
                         "version": info["version"], "deployment": info["deployment"],
                         "k/n returned": fmt_rate(rate(int(part.returned.fillna(False).sum()),
                                                       len(part))),
                         "source": shown(bug["source"]),
                         "source text read here": bug["read_here"],
                         "read instead or beside": " ".join(
                             shown(u) for u in bug.get("read_instead") or [])})
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame.sort_values(["bug", "store", "version", "deployment"],
                                  kind="stable").reset_index(drop=True)
    not_bugs = "; ".join(f"{n['what']}: {n['why']} ({shown(n['source'])})" for n in NOT_BUGS)
    return Table("backends_known_bugs", "Known public bugs, k/n by version", frame,
                 "n = the matrix read probes whose row's fleet is one the request named, or "
                 "the caller's home fleet, extended as a string (`fleet-10` for `fleet-1`), "
                 "k = those that returned the row; 95% Wilson intervals. version = the "
                 "package that decides the store's behaviour: CVE-2026-71433 is in "
                 "langgraph-checkpoint-sqlite / -postgres (InMemoryStore, in langgraph itself, "
                 "is not the affected code). Not a bug, so not listed: " + not_bugs + ".")
