"""Each backend gap of the matrix, classified by a rule over its trace."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

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

BY_ID_PATHS = ("get", "patch", "patch_content", "delete")
# the public bugs the matrix measures by version, and what was listed as one but is a
# backend's documented behaviour (backend_promises_catalogue.yaml)
KNOWN_BUGS = catalogue("backend_promises")["known_bugs"]
NOT_BUGS = catalogue("backend_promises")["not_bugs"]
READ_PREFIXES = ("search", "list", "recall")
GAP_CLASSES = (
    "cross-tenant: another tenant's row",
    "by id: read or change without the caller's scope",
    "prefix sibling: the row's fleet extends a fleet the request named",
    "agent-scoped row in a fleet the request named",
    "fleet named by the request (no trust ladder)",
    "default tenant-wide scope (no fleet named, tenant key or singular field)",
    "agent-scoped row in the caller's default scope",
    "default scope",
    "read outside the fleets the request named",
    "write into a fleet the request named (no write gate)",
    "read after a redistribute the backend does not have (the row never moved)",
    "other",
)


def prefix_sibling(fleets: str | None, row_fleet: str | None, home: str | None = None
                   ) -> bool:
    """The row's fleet is not one the request named (else the caller's home fleet, its
    default scope) but extends one as a string (`fleet-10` for `fleet-1`): what a prefix
    match across a boundary returns."""
    named = [f for f in (fleets or "").split(",") if f] or ([home] if home else [])
    return bool(row_fleet) and row_fleet not in named \
        and any(row_fleet.startswith(f) for f in named)


def classify_gap(path: str, fleets: str | None, row_fleet: str | None, visibility: str | None,
                 cross_tenant: bool, principal: str | None, home: str | None = None) -> str:
    """One class per gap, the first rule that holds (so the classes sum to the gap count):
    what the request named, the row's observed fleet and visibility, who asked and its home
    fleet (the census's)."""
    named = [f for f in (fleets or "").split(",") if f]
    if cross_tenant:
        return GAP_CLASSES[0]
    if path in BY_ID_PATHS:
        return GAP_CLASSES[1]
    if path.startswith(READ_PREFIXES):
        if prefix_sibling(fleets, row_fleet, home):
            return GAP_CLASSES[2]
        if named and row_fleet in named:
            return GAP_CLASSES[3] if visibility == "scope_agent" else GAP_CLASSES[4]
        if named:
            return GAP_CLASSES[8]
        if (principal or "").startswith("tenant key") or path.endswith("singular"):
            return GAP_CLASSES[5]
        return GAP_CLASSES[6] if visibility == "scope_agent" else GAP_CLASSES[7]
    if path == "write":
        return GAP_CLASSES[9]
    if path == "after_redistribute":
        return GAP_CLASSES[10]
    return GAP_CLASSES[11]


def _str(value: Any) -> str | None:
    """A trace field as text; a missing one (null, or NaN in a frame) as None."""
    return value if isinstance(value, str) else None


def _texts(frame: pd.DataFrame, columns: list[str]) -> list[list[str | None]]:
    """Columns of trace fields as lists of `_str` values, converted column-wise (iterating a
    pandas string column element by element costs more than the rules run on it)."""
    return [[_str(v) for v in frame[c].to_numpy(dtype=object)] for c in columns]


def attribution_tables(results: Results, traces_root: Path | None,
                       probes: pd.DataFrame | None = None) -> tuple[Table, Table]:
    """backends_gap_classes (per backend matrix run: gaps by class, checked to sum to the run's
    gap count in backend_matrix_counts) and backends_known_bugs (k/n per version of each known
    public bug the matrix reaches); `probes` as for `judged_probes`."""
    runs = _backend_matrix_runs(results)
    probes = _matrix_probes(results, list(runs.run_id)) if probes is None else probes.copy()
    if probes.empty:
        empty = pd.DataFrame()
        return (Table("backends_gap_classes", "Backend gaps by cause", empty, NO_MATRIX),
                Table("backends_known_bugs", "Known public bugs, k/n by version", empty,
                      NO_MATRIX))
    label_of = dict(zip(runs.run_id, runs.profile, strict=False))
    probes["label"] = probes.run_id.map(label_of)
    gaps = probes[probes.verdict == "gap"].copy()
    classify = functools.cache(classify_gap)  # a few hundred distinct gaps in thousands
    gaps["class"] = [classify(path, fleets, row_fleet, visibility, bool(crossing), principal,
                              home)
                     for path, fleets, row_fleet, visibility, crossing, principal, home in zip(
                         *_texts(gaps, ["path", "fleets", "row_fleet", "visibility"]),
                         gaps.cross_tenant.tolist(), *_texts(gaps, ["principal", "home"]),
                         strict=True)]
    counts = gaps.pivot_table(index="class", columns="label", values="probe_id",
                              aggfunc="count", fill_value=0)
    counts = counts.reindex([c for c in GAP_CLASSES if c in counts.index])
    _check_classes(results, counts, label_of)
    counts.loc["all gaps"] = counts.sum()
    classes = Table("backends_gap_classes", "Backend gaps by cause (rule over each trace)",
                    counts.reset_index().rename(columns={"class": "cause"}),
                    "Each gap of a backend's canonical matrix run gets the first cause whose "
                    "rule holds on its recorded request and the row's observed fleet and "
                    "visibility (`classify_gap`); each column's causes sum to `all gaps`, "
                    "checked against the run's gap count (backend_matrix_counts) when the "
                    "table is built.")
    return classes, known_bugs_table(probes, runs, traces_root)


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
    sibling_of = functools.cache(prefix_sibling)  # a few hundred distinct triples
    is_sibling = pd.Series([sibling_of(f, r, h) for f, r, h in zip(
        *_texts(probes, ["fleets", "row_fleet", "home"]), strict=True)], index=probes.index,
        dtype=bool) & probes.path.str.startswith(READ_PREFIXES)
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
