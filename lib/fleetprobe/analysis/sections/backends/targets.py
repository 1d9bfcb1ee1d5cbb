"""The backends table (one row per target x metric), its figure and the minimal
reproductions of every leak measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from fleetprobe.analysis.base.catalogues import catalogue  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.base.stats import fmt_rate, rate  # noqa: E402
from fleetprobe.analysis.base.tables import Table  # noqa: E402
from fleetprobe.analysis.sections.backends.common import (  # noqa: E402
    NO_MATRIX,
    NO_RUNS,
    _cell,
    _save_png,
    _why,
    backend_of,
)
from fleetprobe.analysis.sections.backends.world import (  # noqa: E402
    SAME_WORLD_PLAN,
    footnote,
    profile_runs,
)
from fleetprobe.oracle.policy import PATHS  # noqa: E402

# (metric view row, experiment, what it counts, the signal a governed store keeps low/high)
METRICS: tuple[tuple[str, str, str], ...] = (
    ("leakage_search_leak", "leakage",
     "search leak (expected-deny probes that returned it; documented variant)"),
    ("leakage_search_miss", "leakage",
     "search miss (expected-allow probes that missed it; documented variant)"),
    ("leakage_get_exposure", "leakage", "GET-by-id exposure, tenant key (expected deny)"),
    ("leakage_agent_get_leak", "leakage", "GET-by-id leak, agent keys (expected deny)"),
    ("leakage_agent_get_miss", "leakage", "GET-by-id miss, agent keys (expected allow)"),
    ("propagation_sibling_visible", "propagation", "sibling sees the fleet fact"),
    ("propagation_foreign_leak", "propagation", "foreign fleet sees it (leak)"),
    ("propagation_redistribute_flipped", "propagation", "redistribute re-homes the row"),
    ("provenance_complete", "provenance", "chain walk complete"),
    ("provenance_accurate", "provenance", "writer recorded at every hop"),
    ("contradiction_detected", "contradiction", "contradiction detected"),
    ("contradiction_stale_read", "contradiction", "reader sees a stale value"),
    ("matrix_gap", "matrix", "governance matrix: gaps (returns, reveals or changes what the "
     "policy denies) over judged probes"),
    ("matrix_miss", "matrix", "governance matrix: misses (withholds what a path must return) "
     "over judged probes"),
)
LEAK_METRICS = ("leakage_search_leak", "leakage_get_exposure", "leakage_agent_get_leak",
                "propagation_foreign_leak")
# The same bug where the backend's own tracker (or a downstream fix) already knows it, by
# (backend, axis, credential) of the leaking probe; else why (backends_catalogue.yaml).
CATALOGUE = catalogue("backends")
KNOWN_ISSUES: dict[tuple[str, str, str], str] = {
    (i["backend"], i["axis"], i["credential"]): i["issue"] for i in CATALOGUE["known_issues"]}
WHY: dict[tuple[str, str], str] = {
    (backend, axis): text for backend, axes in CATALOGUE["why"].items()
    for axis, text in axes.items()}
SINGULAR, TENANT_GET = CATALOGUE["singular"], CATALOGUE["tenant_get"]


def known_issue(backend: str, axis: str, leak: dict[str, Any]) -> str:
    if axis == "search" and leak.get("variant_search") == "fleet_id_singular":
        return SINGULAR
    found = KNOWN_ISSUES.get((backend, axis, leak.get("credential") or "tenant"))
    if found:
        return found
    if axis == "get" and leak.get("credential") != "agent":
        return TENANT_GET
    why = WHY.get((backend, axis))
    return f"no upstream issue found; {why}" if why else "no upstream issue found"


def _versions(results: Results, traces_root: Path | None) -> dict[str, str]:
    """run_id -> `<version> (<store>)` of a backend run, from its manifest (the analysis's
    manifest table keeps only the fields every target has)."""
    out: dict[str, str] = {}
    for run in results.runs.itertuples():
        if backend_of(run.profile) is None or traces_root is None:
            continue
        try:
            manifest = json.loads((Path(traces_root) / run.run_id / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        target = manifest.get("target") or {}
        out[run.run_id] = (f"{target.get('backend_version') or '?'} "
                           f"({target.get('backend_store') or '?'})")
    return out


def backends_table(results: Results, traces_root: Path | None = None) -> Table:
    """One row per target x metric: each backend's canonical run of the metric's experiment,
    and each bundled profile's run drawn beside it (world.profile_runs: its run on the
    backends' world, picked by manifest params, where it ran one; else its canonical run)."""
    canonical = results.canonical
    counts = _count_index(_counts(results))
    na = results.view("backend_not_applicable")
    versions = _versions(results, traces_root)
    backend_runs = canonical[canonical.profile.map(backend_of).notna()]
    rows: list[dict[str, Any]] = []
    if not backend_runs.empty:
        for profile in sorted(set(backend_runs.profile)):
            for metric, experiment, label in METRICS:
                run = results.canonical_run(experiment, profile)
                if run is not None:
                    rows.append(_row(profile, metric, label, run, counts, na, versions)
                                | {"world": "backend's canonical run"})
        beside = {e: profile_runs(results, e) for e in dict.fromkeys(e for _, e, _ in METRICS)}
        profiles = sorted({p for runs, _ in beside.values() for p in runs["server profile"]})
        for profile in profiles:
            for metric, experiment, label in METRICS:
                runs, same = beside[experiment]
                found = runs[runs["server profile"] == profile]
                if not found.empty:
                    rows.append(_row(profile, metric, label, found.iloc[0], counts, na,
                                     versions)
                                | {"world": "the backends' (same params)" if same
                                   else "its canonical run"})
    return Table("backends", "Backends: LangGraph store, mem0 and CrewAI Memory beside the "
                 "bundled profiles", pd.DataFrame(rows),
                 NO_RUNS if not rows else
                 "One row per target x metric: a backend's canonical run of the experiment, a "
                 "bundled profile's run on the backends' world where it ran one (`world`: "
                 "picked by manifest params equal to the backends' but the target, never by "
                 "label; " + SAME_WORLD_PLAN + "), else its canonical run. Rates "
                 "k/n = value [95% Wilson CI] over judged events; `not applicable` = the "
                 "target has no equivalent of the request (501 NOT_SUPPORTED_BY_BACKEND), "
                 "neither pass nor fail. Mappings and versions: docs/backends.md.")


def _counts(results: Results) -> pd.DataFrame:
    return pd.concat([results.view("backend_metric_counts"),
                      results.view("backend_matrix_counts")], ignore_index=True)


Counts = dict[tuple[str, str], tuple[int, int, int, str | None]]


def _count_index(counts: pd.DataFrame) -> Counts:
    """(run_id, metric) -> (numerator, denominator, not applicable, the first reason given),
    summed over the count views' rows, so a table row looks its counts up instead of
    filtering the frame."""
    sums = counts.groupby(["run_id", "metric"], sort=False).agg(
        k=("numerator", "sum"), n=("denominator", "sum"), na=("not_applicable", "sum"),
        reason=("na_reason", "first"))  # first non-null, in the views' order
    return {key: (int(k), int(n), int(na), reason if isinstance(reason, str) else None)
            for key, k, n, na, reason in zip(sums.index, sums.k, sums.n, sums.na, sums.reason,
                                             strict=True)}


def _row(profile: str, metric: str, label: str, run: Any, counts: Counts,
         na: pd.DataFrame, versions: dict[str, str]) -> dict[str, Any]:
    k, n, n_na, reason = counts.get((run.run_id, metric), (0, 0, 0, None))
    reason = reason if n_na else None
    if metric == "contradiction_detected" and reason is None:
        # detection keys on the subject entity: a target without entity upsert cannot run it
        entity = na[(na.run_id == run.run_id) & (na.phase == "entity")]
        if not entity.empty:
            reason, n_na = entity.reason.iloc[0], int(entity.n.sum())
    applicable = "not applicable" if reason is not None and (n == 0 or metric ==
                                                              "contradiction_detected") \
        else "applicable" if n else "no events"
    return {
        "target": profile, "kind": "backend" if backend_of(profile) else "reference",
        "version": versions.get(run.run_id) or f"bundled server {run.server_version or ''}"
        .strip(), "metric": label,
        "applicability": applicable,
        "result": fmt_rate(rate(k, n)) if n and applicable == "applicable" else "-",
        "not_applicable": f"{n_na}: {reason}" if reason else "",
        "run": run.run_id,
    }


def backends_figure(results: Results, out_dir: Path, table: Table | None = None,
                    world: str = "") -> tuple[dict[Path, bytes], str]:
    """Leak rates per target with Wilson intervals (applicable metrics only)."""
    table = table if table is not None else backends_table(results)
    if table.empty:
        return {}, NO_RUNS
    counts = _count_index(_counts(results))
    metric_of = {label: m for m, _, label in METRICS}
    rows = []
    for rec in table.frame.itertuples():
        metric = metric_of[rec.metric]
        if metric not in LEAK_METRICS or rec.applicability != "applicable":
            continue
        k, n, _, _ = counts.get((rec.run, metric), (0, 0, 0, None))
        r = rate(k, n)
        rows.append({"target": rec.target, "metric": rec.metric.split(" (")[0], "r": r})
    if not rows:
        return {}, "no applicable leak metric in the canonical runs"
    frame = pd.DataFrame(rows)
    metrics = list(dict.fromkeys(frame.metric))
    targets = list(dict.fromkeys(frame.target))
    fig, ax = plt.subplots(figsize=(4.0 + 1.6 * len(metrics), 3.8))
    width = 0.8 / max(len(targets), 1)
    # one colour per target: the default cycle repeats after ten, and this figure has more
    colours = plt.get_cmap("tab20").colors
    for i, target in enumerate(targets):
        sub = frame[frame.target == target].set_index("metric")
        xs = [j + i * width for j, m in enumerate(metrics) if m in sub.index]
        rs = [sub.loc[m, "r"] for m in metrics if m in sub.index]
        ax.bar(xs, [r.value for r in rs], width, label=target, color=colours[i % len(colours)],
               yerr=[[r.value - r.low for r in rs], [r.high - r.value for r in rs]], capsize=2)
    ax.set_xticks([j + width * (len(targets) - 1) / 2 for j in range(len(metrics))])
    ax.set_xticklabels(metrics, rotation=15, ha="right", fontsize=8)
    ax.set_ylabel("rate (95% Wilson CI)")
    ax.set_ylim(0, 1.05)
    ax.set_title("Leakage by target (canonical runs)", fontsize=9)
    ax.legend(fontsize=7, title="target", title_fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))  # beside the axes, never over a bar
    fig.tight_layout()
    footnote(fig, world)  # where the backends' leakage world differs from the profiles'
    # 150 dpi like the other figures: at the default 100 its 7 pt legend was hard to read
    return _save_png(fig, out_dir, "backends_leakage", dpi=150), ""


def reproductions(results: Results) -> str:
    """Markdown: per backend and leak axis, the write and one leaking probe as recorded."""
    lines = ["# Backends: minimal reproductions of the leaks measured", ""]
    runs = results.canonical[(results.canonical.experiment == "leakage")
                             & results.canonical.profile.map(backend_of).notna()]
    if runs.empty:
        return "\n".join(lines + [NO_RUNS, ""])
    leaks = _first_leaks(results, list(runs.run_id))
    for run in runs.itertuples():
        backend = backend_of(run.profile)
        for axis in ("search", "get"):
            leak = leaks.get((run.run_id, axis))
            if leak is None:
                continue
            lines += [f"## {backend}: {axis} ({run.run_id})", ""]
            if leak["secret_id"] and leak["written"]:
                scope = leak["secret_scope"]
                fleet = leak["writer_fleet"] if leak["variant_write"] == "fleet_id" else "none"
                lines.append(f"1. `POST /api/v1/memories` as `{leak['writer_agent']}` (fleet "
                             f"`{fleet}`), {'an' if scope == 'agent' else 'a'} {scope}-scoped "
                             "row.")
            who = (f"the agent key of `{leak['prober_agent']}` (fleet "
                   f"`{leak['prober_fleet']}`, trust {leak['trust']})"
                   if leak["credential"] == "agent" else
                   f"the tenant key on behalf of `{leak['prober_agent']}` (fleet "
                   f"`{leak['prober_fleet']}`)")
            scope = (f", search variant `{leak['variant_search']}`" if axis == "search"
                     else "")
            lines += [f"2. `{(leak['op'] or axis).split('?')[0]}` with {who}{scope}: relation "
                      f"`{leak['relation']}`, expected `deny`, status {leak['status']}, the "
                      "row came back.",
                      f"3. Known: {known_issue(backend, axis, leak)}", ""]
    return "\n".join(lines)


# Per run and leak axis, the first leaking probe (an agent key's first, then the documented
# fleet_ids variant's, then in trace order) and the first write of the row it returned;
# search: the probe phase's search probes; get: the GET probes (axis get, or none) of the
# probe, agent_probe and reprobe phases.
FIRST_LEAKS = """
WITH leaks AS (
    SELECT run_id, op, status, prober_agent, prober_fleet, secret_id, relation, credential,
           trust, variant_search,
           CASE WHEN phase = 'probe' AND axis = 'search' THEN 'search'
                WHEN phase IN ('probe', 'agent_probe', 'reprobe')
                     AND (axis = 'get' OR axis IS NULL) THEN 'get' END AS leak_axis,
           row_number() OVER (PARTITION BY run_id, leak_axis
                              ORDER BY credential = 'agent' DESC,
                                       coalesce(variant_search, '') = 'fleet_ids' DESC, seq)
               AS rank
    FROM events
    WHERE list_contains(?::VARCHAR[], run_id) AND leak
      AND phase IN ('probe', 'agent_probe', 'reprobe')
), writes AS (
    SELECT run_id, secret_id, secret_scope, writer_agent, writer_fleet, variant_write,
           row_number() OVER (PARTITION BY run_id, secret_id ORDER BY seq) AS rank
    FROM events WHERE list_contains(?::VARCHAR[], run_id) AND phase = 'write'
)
SELECT l.* EXCLUDE (rank), w.secret_scope, w.writer_agent, w.writer_fleet, w.variant_write,
       w.rank IS NOT NULL AS written
FROM leaks l LEFT JOIN writes w ON w.run_id = l.run_id AND w.secret_id = l.secret_id
                                AND w.rank = 1
WHERE l.rank = 1 AND l.leak_axis IS NOT NULL
"""


def _first_leaks(results: Results, run_ids: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(run_id, axis) -> the first leaking probe and its row's write (FIRST_LEAKS), one query
    for every run."""
    cur = results.con.execute(FIRST_LEAKS, [run_ids, run_ids])
    names = [c[0] for c in cur.description]
    return {(row["run_id"], row["leak_axis"]): row
            for row in (dict(zip(names, r, strict=True)) for r in cur.fetchall())}


# -- the governance matrix, path by path ----------------------------------------------------

def matrix_paths_table(results: Results) -> Table:
    """One row per matrix path, one column per target (backends first, then the bundled
    profiles), each from its canonical matrix run: `gaps/judged` (with misses), or `n/a` with
    the count when the target has no equivalent of the path or of what its probes need."""
    canonical = results.canonical[results.canonical.experiment == "matrix"]
    if canonical.empty or canonical.profile.map(backend_of).isna().all():
        return Table("backends_matrix", "Governance matrix per path: backends beside the "
                     "bundled profiles", pd.DataFrame(), NO_MATRIX)
    backends = canonical[canonical.profile.map(backend_of).notna()]
    profiles, same = profile_runs(results, "matrix")
    run_of = dict(zip(backends.profile, backends.run_id, strict=True))
    run_of |= dict(zip(profiles["server profile"], profiles.run_id, strict=True))
    targets = sorted(run_of, key=lambda p: (backend_of(p) is None, p))
    paths = results.view("backend_matrix_paths", list(run_of.values()))
    # the view has one row per run and path: a cell is a lookup, not a frame filter
    cells = {(r["run_id"], r["path"]): r for r in paths.to_dict("records")}
    if len(cells) != len(paths):
        raise ValueError("backend_matrix_paths has more than one row for a run and path")
    rows, reasons = [], {}
    for path in PATHS:
        line: dict[str, Any] = {"path": path}
        for target in targets:
            cell = cells.get((run_of[target], path))
            line[target] = _cell(cell)
            if backend_of(target) and cell is not None and isinstance(cell["na_reason"], str):
                reasons.setdefault(path, {})[backend_of(target)] = cell["na_reason"]
        rows.append(line)
    frame = pd.DataFrame(rows)
    frame["why not applicable (backends)"] = [_why(reasons.get(p, {})) for p in frame.path]
    return Table("backends_matrix", "Governance matrix per path: backends beside the bundled "
                 "profiles", frame,
                 "Cell = gaps/judged probes (and misses) from each target's canonical matrix "
                 "run; `n/a (k)` = k probes not applicable (the backend has no equivalent of the "
                 "path, or of the world-building step its probes need), neither pass nor fail; "
                 "`-` = not probed. " + (
                     "Bundled profiles: each profile's run on the backends' world "
                     "(params/backends.yaml's matrix configuration; picked by manifest params "
                     "equal to the backends' but the target, never by label), so counts "
                     "compare." if same else
                     "Backends run params/backends.yaml's matrix configuration, the bundled "
                     "profiles params/reference/matrix.yaml: compare rates, not counts."))


