"""Each backend judged by its own promise (issue 37): every gap of a backend's canonical matrix
run is a bug against the backend's own documented scoping, a MemClaw feature the backend does
not have, or a consequence of the adapter's mapping (metrics.sql's backend_promise_verdicts,
by the rules of backend_promises_catalogue.yaml). The promises, the three counts per backend,
store, version and deployment, their bases, a figure and a minimal reproduction of each bug."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fleetprobe.analysis.base.catalogues import catalogue  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.base.tables import Table  # noqa: E402
from fleetprobe.analysis.sections.backends.common import (  # noqa: E402
    NO_MATRIX,
    _backend_matrix_runs,
    _save_png,
    shown,
    target_info,
)
from fleetprobe.analysis.sections.backends.world import footnote  # noqa: E402

PROMISES = catalogue("backend_promises")
VERDICTS: dict[str, str] = PROMISES["verdicts"]
# table and figure order: the bug first, then the two that are not bugs, then what no rule
# matched (shown, never counted with the bugs)
ORDER = ("breaks_promise", "lacks_feature", "adapter_mapping", "unclassified")
COLOURS = {"breaks_promise": "#c0392b", "lacks_feature": "#7f8c8d",
           "adapter_mapping": "#2e86c1", "unclassified": "#f1c40f"}
TARGET = ["backend", "store", "version", "deployment"]


def basis_text(backend: str, basis: str | None) -> str:
    """What a verdict rests on: the backend's own promise, a feature it lacks or a mapping."""
    if basis == "promise":
        entry = PROMISES["backends"].get(backend, {})
        return f"its own promise: {entry.get('scoping', '?')}"
    return PROMISES["features"].get(basis) or PROMISES["mappings"].get(basis) or str(basis)


def verdict_rows(results: Results, traces_root: Path | None) -> pd.DataFrame:
    """Every gap of the backends' canonical matrix runs with its verdict and basis
    (backend_promise_verdicts) and its run's store and version (from the manifest)."""
    runs = _backend_matrix_runs(results)
    if runs.empty:
        return pd.DataFrame()
    frame = results.con.execute(
        "SELECT * FROM backend_promise_verdicts WHERE list_contains(?::VARCHAR[], run_id)",
        [list(runs.run_id)]).df()
    info = pd.DataFrame([{"run_id": r, **target_info(traces_root, r)} for r in runs.run_id])
    return frame.drop(columns=["backend", "deployment"]).merge(info, on="run_id")


def _check(results: Results, rows: pd.DataFrame, run_ids: list[str]) -> None:
    """Every gap gets exactly one verdict: per run, the verdicts sum to its gap count."""
    totals = results.view("backend_matrix_counts", run_ids)
    totals = totals[totals.metric == "matrix_gap"].groupby("run_id").numerator.sum()
    got = rows.groupby("run_id").size() if not rows.empty else pd.Series(dtype=int)
    for run_id in sorted(set(run_ids) | set(got.index)):
        if int(got.get(run_id, 0)) != int(totals.get(run_id, 0)):
            raise ValueError(f"{run_id}: verdicts sum to {int(got.get(run_id, 0))}, the run has "
                             f"{int(totals.get(run_id, 0))} gaps (backend_matrix_counts)")


def verdict_tables(results: Results, traces_root: Path | None, world: str = ""
                   ) -> tuple[Table, Table, pd.DataFrame]:
    """backends_promise_verdicts (per backend, store, version and deployment: gaps that break
    the backend's own promise, that a missing feature explains, that the adapter's mapping
    makes) and backends_verdict_bases (the same by what each verdict rests on), and the rows."""
    rows = verdict_rows(results, traces_root)
    names = ("backends_promise_verdicts", "backends_verdict_bases")
    titles = ("Backends judged by their own promise: bugs, missing features and the "
              "adapter's mapping, apart", "What each backend verdict rests on")
    if rows.empty:
        return (Table(names[0], titles[0], pd.DataFrame(), NO_MATRIX),
                Table(names[1], titles[1], pd.DataFrame(), NO_MATRIX), rows)
    _check(results, rows, list(_backend_matrix_runs(results).run_id))
    counts = rows.pivot_table(index=TARGET, columns="promise_verdict", values="probe_id",
                              aggfunc="count", fill_value=0)
    counts = counts.reindex(columns=list(ORDER), fill_value=0)
    counts["all gaps"] = counts.sum(axis=1)
    counts = counts.rename(columns=VERDICTS).reset_index()
    note = ("Each gap of a backend's canonical governance-matrix run, judged against the "
            "backend's own documented promise (backend_promises_catalogue.yaml, its sources "
            "in tables/backends_promises.md): `" + VERDICTS["breaks_promise"] + "` only where "
            "the backend returned what its own scoping excludes; a MemClaw feature the "
            "backend does not claim (write gate, trust ladder, redistribute, ...) is never a "
            "bug; what the adapter's mapping of tenants, default scopes and agent rows makes "
            "is named as such. Per row the columns sum to `all gaps` (checked against "
            "backend_matrix_counts).")
    unjudged = sorted(set(PROMISES["backends"]) - set(rows.backend))
    if unjudged:  # a promise written down, no matrix run to judge by it
        note += (" No governance-matrix run, so no verdicts here: " + ", ".join(unjudged)
                 + " (docs/backends.md says why and what its other runs measured).")
    bases = (rows.assign(verdict=rows.promise_verdict.map(VERDICTS),
                         basis=[basis_text(b, s) for b, s in zip(rows.backend, rows.basis,
                                                                   strict=True)])
             .groupby([*TARGET, "verdict", "basis"], sort=True)
             .agg(gaps=("probe_id", "count"), cross_tenant=("cross_tenant", "sum"))
             .reset_index())
    return (Table(names[0], titles[0], counts, _join(note, world)),
            Table(names[1], titles[1], bases, _join(
                "Per backend, store, version and deployment: the gaps of each verdict by "
                "what it rests on (the backend's promise, the feature it lacks, the mapping "
                "that makes it), and how many of them crossed tenants.", world)), rows)


def _join(note: str, world: str) -> str:
    return f"{note} {world}".strip()


def promises_table() -> Table:
    """Each backend's promise, the pages it is taken from and what it does not have."""
    rows = []
    for backend, entry in PROMISES["backends"].items():
        rows.append({
            "backend": entry["name"], "scoping": entry["scoping"],
            "promise": " ".join(entry["promise"].split()),
            "sources": " ".join(shown(s["url"]) for s in entry["sources"]),
            "idiomatic": entry["deployments"]["idiomatic"],
            "strict": entry["deployments"]["strict"],
            "lacks (MemClaw features)": "; ".join(
                PROMISES["features"][f].split(":")[0] for f in entry["lacks"]),
            "key": backend})
    return Table("backends_promises", "Each backend's own promise, from its documentation",
                 pd.DataFrame(rows).drop(columns="key"),
                 "From each backend's own documentation and source (the pages' addresses, the "
                 "scheme left off; paraphrased): "
                 "the scoping it promises, the two deployments the adapter runs it under, and "
                 "the MemClaw features it does not have (a gap they explain is a design "
                 "difference, never a bug).")


def verdicts_figure(rows: pd.DataFrame, out_dir: Path, world: str = ""
                    ) -> tuple[dict[Path, bytes], str]:
    """One horizontal bar per backend target and deployment, split into the three verdicts."""
    if rows.empty:
        return {}, NO_MATRIX
    counts = rows.groupby([*TARGET, "promise_verdict"]).size().unstack(fill_value=0)
    counts = counts.reindex(columns=[v for v in ORDER if v in counts.columns])
    labels = [f"{b} · {st} · {v.replace('langgraph-checkpoint-', 'ckpt-')} · {d}"
              for b, st, v, d in counts.index]
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.3 * len(labels)), dpi=150)
    left = [0] * len(labels)
    for verdict in counts.columns:
        values = counts[verdict].tolist()
        ax.barh(range(len(labels)), values, left=left, color=COLOURS[verdict],
                label=VERDICTS[verdict])
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("governance-matrix gaps (canonical run)", fontsize=8)
    ax.set_title("Backend gaps by verdict: only red is a bug against the backend's own promise",
                 fontsize=9)
    # one column under the axes: three in a row ran past the figure's right edge
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    footnote(fig, world)
    return _save_png(fig, out_dir, "backends_verdicts", dpi=150), ""


# the first bug per run: a search or listing first (the smallest request), then by id
FIRST_BUGS = """
SELECT v.run_id, v.label, v.backend, v.path, v.principal, v.fleets, v.row_fleet, v.home,
       v.visibility, p.op, p.status, p.who, p.row_key, p.returned, c.owner
FROM (SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY NOT (starts_with(path, 'search')
             OR starts_with(path, 'list')), probe_id) AS rank
      FROM backend_promise_verdicts
      WHERE promise_verdict = 'breaks_promise' AND list_contains(?::VARCHAR[], run_id)) v
JOIN events p ON p.run_id = v.run_id AND p.phase = 'probe' AND p.probe_id = v.probe_id
LEFT JOIN (SELECT DISTINCT run_id, row_key, owner FROM events WHERE phase = 'census_row') c
       ON c.run_id = v.run_id AND c.row_key = p.row_key
WHERE v.rank = 1 ORDER BY v.label
"""


def bug_reproductions(results: Results, traces_root: Path | None) -> list[str]:
    """Markdown: per backend target whose canonical matrix run broke its own promise, the
    first such probe's request and answer as recorded, and the public bug it matches."""
    runs = _backend_matrix_runs(results)
    lines = ["## Bugs against the backend's own promise (governance matrix)", ""]
    if runs.empty:
        return [*lines, NO_MATRIX, ""]
    cur = results.con.execute(FIRST_BUGS, [list(runs.run_id)])
    names = [c[0] for c in cur.description]
    found = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if not found:
        return [*lines, "No gap of a backend's canonical matrix run breaks the backend's own "
                "promise.", ""]
    for bug in found:
        info = target_info(traces_root, bug["run_id"])
        lines += [f"### {bug['label']} ({info['version']}, {bug['run_id']})", "",
                  *_repro(bug), ""]
    return lines


def _repro(bug: dict[str, Any]) -> list[str]:
    who = ("the tenant key" if str(bug["principal"] or "").startswith("tenant key")
           else f"the agent key of `{bug['who']}` (home fleet `{bug['home'] or 'none'}`, "
                f"`{bug['principal']}`)")
    named = f"fleets named `{bug['fleets']}`" if bug["fleets"] else "no fleet named"
    known = [k for k in PROMISES["known_bugs"] if k["backend"] == bug["backend"]]
    return [f"- Request: `{bug['op']}` ({bug['path']}) with {who}, {named}.",
            f"- Answer: status {bug['status']}, returned row `{bug['row_key']}` of fleet "
            f"`{bug['row_fleet']}` ({bug['visibility']}, owner `{bug['owner']}`), which "
            "the backend's own scoping excludes (its promise: "
            + PROMISES["backends"][bug["backend"]]["scoping"] + ").",
            "- Known: " + ("; ".join(f"{k['bug']} ({k['source']})" for k in known)
                           or "no public report found")]
