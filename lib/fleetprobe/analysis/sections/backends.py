"""The backends table, its figure and the minimal reproductions, from the traces alone.

One row per target x metric: every backend run behind the wire adapter (profile
`backend-<name>`, docs/backends.md) beside the bundled server's profiles, each from its
experiment's canonical run (`Results.canonical`). A metric whose events the target answered
"not supported by this backend" is not applicable, with the reason, never a pass or a fail.
Where a backend leaks, `backends_repro.md` shows the smallest recorded case (the write and
one leaking probe, as recorded) and the backend's own issue where the same bug is known.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402

from fleetprobe.analysis.base.figures import FigureOutput  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.base.section import Context, SectionOutput, finish  # noqa: E402
from fleetprobe.analysis.base.stats import fmt_rate, rate  # noqa: E402
from fleetprobe.analysis.base.tables import Table, records, write_table  # noqa: E402
from fleetprobe.policy import PATHS  # noqa: E402

KEY, TITLE = "backends", "Backends"
EXPERIMENTS = ("leakage", "contradiction", "provenance", "propagation", "matrix")

BACKEND_PREFIX = "backend-"
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
# (backend, axis, credential) of the leaking probe.
KNOWN_ISSUES: dict[tuple[str, str, str], str] = {
    ("mem0", "get", "agent"): "strands-agents/tools#596 (downstream fix: mem0's "
                              "`get(memory_id)` takes no owner, so its callers check ownership)",
    ("mem0", "get", "tenant"): "strands-agents/tools#596 (downstream fix: mem0's "
                               "`get(memory_id)` takes no owner, so its callers check ownership)",
    ("langgraph", "search", "tenant"): "by design: `BaseStore.search` returns every namespace "
                                       "under the prefix, agent namespaces of a fleet included "
                                       "(segment-crossing variant: langchain-ai/langgraphjs#2721)",
}
# Why, where no upstream issue was found.
WHY: dict[tuple[str, str], str] = {
    ("mem0", "search"): "mem0 has no visibility concept: `scope_agent` is metadata its search "
                        "does not interpret, and its filters scope by what the caller asks for",
    ("crewai", "get"): "CrewAI's Memory has no read by id; its storage protocol's "
                       "`get_record(id)` takes no scope and no source",
    ("crewai", "search"): "CrewAI matches scopes as string prefixes (crewAIInc/crewAI#7543)",
}
SINGULAR = ("the request names no fleet (`fleet_id` singular, which MemClaw's schema ignores), "
            "so the scope is the caller's default: the whole tenant for a tenant key")
TENANT_GET = ("the tenant key names no agent, so its reach is the whole tenant (as MemClaw's "
              "2026-05-30 GET-by-id)")


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


NO_RUNS = ("no backend runs yet: run `make backends` (or `python -m fleetprobe run <experiment> "
           "--set target.kind=backend --set target.backend=<langgraph|mem0|crewai>`)")


def backend_of(profile: str | None) -> str | None:
    return profile[len(BACKEND_PREFIX):] if profile and profile.startswith(BACKEND_PREFIX) \
        else None


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
    canonical = results.canonical
    counts = _count_index(_counts(results))
    na = results.view("backend_not_applicable")
    versions = _versions(results, traces_root)
    backend_runs = canonical[canonical.profile.map(backend_of).notna()]
    rows: list[dict[str, Any]] = []
    if not backend_runs.empty:
        targets = sorted({p for p in canonical.profile.dropna() if p != "unknown"},
                         key=lambda p: (backend_of(p) is None, p))
        for profile in targets:
            for metric, experiment, label in METRICS:
                run = results.canonical_run(experiment, profile)
                if run is None:
                    continue
                rows.append(_row(profile, metric, label, run, counts, na, versions))
    return Table("backends", "Backends: LangGraph store, mem0 and CrewAI Memory beside the "
                 "bundled profiles", pd.DataFrame(rows),
                 NO_RUNS if not rows else
                 "One row per target x metric, from each experiment's canonical run. Rates "
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
                    ) -> tuple[list[Path], str]:
    """Leak rates per target with Wilson intervals (applicable metrics only)."""
    table = table if table is not None else backends_table(results)
    if table.empty:
        return [], NO_RUNS
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
        return [], "no applicable leak metric in the canonical runs"
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
    # 150 dpi like the other figures: at the default 100 its 7 pt legend was hard to read
    return [_save_png(fig, out_dir, "backends_leakage", dpi=150)], ""


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
    WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND leak
      AND phase IN ('probe', 'agent_probe', 'reprobe')
), writes AS (
    SELECT run_id, secret_id, secret_scope, writer_agent, writer_fleet, variant_write,
           row_number() OVER (PARTITION BY run_id, secret_id ORDER BY seq) AS rank
    FROM events WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND phase = 'write'
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

NO_MATRIX = ("no matrix runs of a backend yet: run `make backends` (or `python -m fleetprobe run "
             "matrix --params params/smoke/matrix.yaml --set target.kind=backend --set "
             "target.backend=<langgraph|mem0|crewai>`)")


def matrix_paths_table(results: Results) -> Table:
    """One row per matrix path, one column per target (backends first, then the bundled
    profiles), each from its canonical matrix run: `gaps/judged` (with misses), or `n/a` with
    the count when the target has no equivalent of the path or of what its probes need."""
    canonical = results.canonical[results.canonical.experiment == "matrix"]
    if canonical.empty or canonical.profile.map(backend_of).isna().all():
        return Table("backends_matrix", "Governance matrix per path: backends beside the "
                     "bundled profiles", pd.DataFrame(), NO_MATRIX)
    paths = results.view("backend_matrix_paths", list(canonical.run_id))
    targets = sorted(canonical.profile.dropna().unique(),
                     key=lambda p: (backend_of(p) is None, p))
    run_of = dict(zip(canonical.profile, canonical.run_id, strict=False))
    # the view has one row per run and path: a cell is a lookup, not a frame filter
    cells = {(r["run_id"], r["path"]): r for r in records(paths)}
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
                 "`-` = not probed. Backends run params/backends.yaml's matrix configuration, "
                 "the bundled profiles params/reference/matrix.yaml: compare rates, not counts.")


# ---- rates per backend x deployment x store x version and path family ------------------

# the matrix's paths in families a reader compares across backends (policy.PATHS)
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("read by id", ("get",)),
    ("search / recall", ("search", "recall")),
    ("list", ("list",)),
    ("change by id", ("patch", "delete", "after_redistribute")),
    ("write", ("write", "bulk_write", "entity_upsert")),
    ("reveal", ("dup_", "idempotency", "bulk_attempt")),
)
ALL_PATHS = "all paths"
# the package whose version decides a store's behaviour (the sweeps vary these)
STORE_PACKAGE = {"SqliteStore": "langgraph-checkpoint-sqlite",
                 "PostgresStore": "langgraph-checkpoint-postgres"}
BACKEND_PACKAGE = {"langgraph": "langgraph", "mem0": "mem0ai", "crewai": "crewai"}


def family(path: str) -> str:
    """The family of a matrix path (`other` for contradictions, entity, agent records, ...)."""
    for name, prefixes in FAMILIES:
        if path.startswith(prefixes):
            return name
    return "other"


def target_info(traces_root: Path | None, run_id: str) -> dict[str, str]:
    """backend, deployment, store and the deciding package's version of a backend run, from
    its manifest (`backend-<name>` runs from before deployments are `idiomatic`)."""
    try:
        manifest = json.loads((Path(traces_root or ".") / run_id / "manifest.json").read_text())
    except (OSError, ValueError):
        manifest = {}
    target = manifest.get("target") or {}
    backend = str(target.get("backend") or "?")
    store = str(target.get("backend_store") or "?")
    store_short = re.sub(r"^Memory\((\w[\w ]*?)[,)].*$", r"\1", store)
    packages = (target.get("backend_env") or {}).get("packages") or {}
    package = STORE_PACKAGE.get(store, BACKEND_PACKAGE.get(backend, backend))
    version = packages.get(package) or (target.get("backend_version")
                                        if package == BACKEND_PACKAGE.get(backend) else None)
    return {"backend": backend, "deployment": target.get("backend_deployment") or "idiomatic",
            "store": store_short, "version": f"{package} {version or '?'}"}


def _backend_matrix_runs(results: Results) -> pd.DataFrame:
    canonical = results.canonical[results.canonical.experiment == "matrix"]
    return canonical[canonical.profile.map(backend_of).notna()]


def judged_probes(results: Results, traces_root: Path | None,
                  probes: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every judged probe of the backends' canonical matrix runs, with its run's backend,
    deployment, store and version and its path family (`probes`: those runs' rows of
    backend_matrix_attribution, if already read)."""
    runs = _backend_matrix_runs(results)
    probes = _matrix_probes(results, list(runs.run_id)) if probes is None else probes
    if probes.empty:
        return probes
    info = pd.DataFrame([{"run_id": r, **target_info(traces_root, r)} for r in runs.run_id])
    probes = probes.merge(info, on="run_id")
    probes["family"] = probes.path.map(family)
    probes["gap"] = probes.verdict == "gap"
    return probes


SIDE = ("idiomatic", "strict")


def _side_by_side(judged: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """gaps/judged [95% Wilson CI] per `keys`, idiomatic and strict in columns of their own."""
    tallies = _tallies(judged, [*keys, "deployment"])
    rows = []
    for key in judged.groupby(keys, sort=True).size().index:
        key = key if isinstance(key, tuple) else (key,)
        line = dict(zip(keys, key, strict=True))
        for side in SIDE:
            k, n = tallies.get((*key, side), (0, 0))
            line[f"{side}: gaps"] = fmt_rate(rate(k, n)) if n else "-"
        rows.append(line)
    return pd.DataFrame(rows)


def _tallies(judged: pd.DataFrame, keys: list[str]) -> dict[tuple, tuple[int, int]]:
    """(gaps, judged probes) per value of `keys`, from one groupby."""
    sums = judged.groupby(keys, sort=False).gap.agg(["sum", "size"])
    return {key: (int(k), int(n)) for key, k, n in zip(sums.index, sums["sum"], sums["size"],
                                                        strict=True)}


def rates_table(judged: pd.DataFrame) -> Table:
    """Gap rates per backend x store x version x path family, idiomatic beside strict."""
    name, title = "backends_rates", ("Backends: gap rates per store, version and path family, "
                                     "idiomatic beside strict")
    if judged.empty:
        return Table(name, title, pd.DataFrame(), NO_MATRIX)
    every = judged.assign(family=ALL_PATHS)
    frame = _side_by_side(pd.concat([every, judged], ignore_index=True),
                          ["backend", "store", "version", "family"])
    order = {f: i for i, f in enumerate([ALL_PATHS, *(n for n, _ in FAMILIES), "other"])}
    frame = frame.sort_values(["backend", "store", "version", "family"],
                              key=lambda c: c.map(order) if c.name == "family" else c,
                              kind="stable").reset_index(drop=True)
    return Table(name, title, frame,
                 "From each backend target's canonical governance-matrix run: gaps (the path "
                 "returned, revealed or changed what the written policy denies) over judged "
                 "probes, 95% Wilson intervals; `idiomatic` = the layout the backend's own docs "
                 "and framework use, `strict` = the strictest scoping its native API expresses "
                 "(docs/backends.md). A gap under `strict` is the backend's; one only under "
                 "`idiomatic` is the usual deployment's. `-`: not run under that deployment. "
                 "version = the package that decides the store's behaviour.")


def cross_tenant_table(judged: pd.DataFrame) -> Table:
    """Probes of another tenant's rows, per backend x store x version, side by side."""
    name, title = "backends_cross_tenant", "Backends: cross-tenant probes that succeeded"
    crossing = judged[judged.cross_tenant] if not judged.empty else judged
    if crossing.empty:
        return Table(name, title, pd.DataFrame(), NO_MATRIX)
    return Table(name, title, _side_by_side(crossing, ["backend", "store", "version"]),
                 "Probes by a principal of the other tenant (same fleet names) of a row it "
                 "must never see or change: k/n returned or changed it, 95% Wilson intervals. "
                 "`idiomatic` keeps every tenant in one collection, table or store, `strict` "
                 "one per tenant (docs/backends.md).")


def overview_figure(judged: pd.DataFrame, out_dir: Path) -> tuple[list[Path], str]:
    """At a glance: one heat map per deployment, a row per backend x store x version and a
    column per path family, coloured by gap rate and labelled k/n."""
    if judged.empty:
        return [], NO_MATRIX
    families = [ALL_PATHS, *(n for n, _ in FAMILIES)]
    targets = sorted(set(zip(judged.backend.tolist(), judged.store.tolist(),
                             judged.version.tolist(), strict=True)))
    keys = ["backend", "store", "version", "deployment"]
    grid = {((b, st, v), side, ALL_PATHS): tally
            for (b, st, v, side), tally in _tallies(judged, keys).items()}
    grid |= {((b, st, v), side, f): tally
             for (b, st, v, side, f), tally in _tallies(judged, [*keys, "family"]).items()}
    labels = [f"{b} · {st} · {v.replace('langgraph-checkpoint-', 'ckpt-')}"
              for b, st, v in targets]
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.2 + 0.42 * len(targets)), sharey=True,
                             dpi=150)  # the dpi it is saved at, which its margins are fit to
    for ax, side in zip(axes, SIDE, strict=True):
        values = [[(grid[(t, side, f)][0] / grid[(t, side, f)][1])
                   if grid.get((t, side, f), (0, 0))[1] else float("nan") for f in families]
                  for t in targets]
        cmap = plt.get_cmap("Reds").with_extremes(bad="0.9")  # grey: not run like this
        ax.imshow(values, cmap=cmap, vmin=0, vmax=1, aspect="auto")
        for i, t in enumerate(targets):
            for j, f in enumerate(families):
                k, n = grid.get((t, side, f), (0, 0))
                if n:  # a cell without probes is grey, and says so in the title
                    ax.text(j, i, f"{k}/{n}", ha="center", va="center", fontsize=6,
                            color="white" if k / n > 0.6 else "black")
        ax.set_xticks(range(len(families)))
        ax.set_xticklabels(families, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{side}", fontsize=9)
    axes[0].set_yticks(range(len(targets)))
    axes[0].set_yticklabels(labels, fontsize=7)
    fig.suptitle("Governance-matrix gaps (returned or changed what the policy denies): "
                 "k/n per path family, darker = more, grey = not run", fontsize=9)
    _fit_margins(fig, labels, families, rotation=30, size=7)
    return [_save_png(fig, out_dir, "backends_overview", dpi=150)], ""


def _fit_margins(fig: Figure, ylabels: list[str], xlabels: list[str], rotation: float,
                 size: float) -> None:
    """Margins that hold the tick labels (measured by the renderer at the figure's dpi,
    without drawing), the axes titles and the suptitle: what tight_layout gives, without the
    dry draw of the whole figure it needs."""
    prop, renderer, dpi = FontProperties(size=size), fig.canvas.get_renderer(), fig.dpi
    extents = {s: renderer.get_text_width_height_descent(s, prop, ismath=False)
               for s in {*ylabels, *xlabels}}  # pixels
    angle = math.radians(rotation)
    tick = (plt.rcParams["ytick.major.size"] + plt.rcParams["ytick.major.pad"]) / 72
    left = max(extents[s][0] for s in ylabels) / dpi + tick + 0.1
    bottom = max(extents[s][0] * math.sin(angle) + extents[s][1] * math.cos(angle)
                 for s in xlabels) / dpi + tick + 0.1
    top, right, gap = 0.62, 0.1, 0.2  # suptitle and axes titles (9 pt each); beside
    width, height = fig.get_size_inches()
    axes_width = (width - left - right - gap) / 2
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=gap / axes_width)


def _save_png(fig: Figure, out_dir: Path, name: str, dpi: float | None = None) -> Path:
    """`<name>.png` (no date or software version in it: the same bytes every build). PNG
    only: the page and the notebook show these figures, nothing reads a PDF of them, and the
    PDF cost as long again to draw."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.png"
    fig.savefig(path, dpi=dpi or "figure", metadata={"Software": None})
    plt.close(fig)
    return path


# ---- attribution: each backend gap of the matrix classified by a rule over its trace

BY_ID_PATHS = ("get", "patch", "patch_content", "delete")
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


def _matrix_probes(results: Results, run_ids: list[str]) -> pd.DataFrame:
    """Every judged matrix probe of these runs with what attribution needs (metrics.sql's
    backend_matrix_attribution), read for these runs only: the bundled profiles' matrix runs
    are three quarters of the view's rows."""
    if not run_ids:
        return pd.DataFrame()
    return results.con.execute(
        "SELECT * FROM backend_matrix_attribution WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "ORDER BY run_id, probe_id", [run_ids]).df()


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
    """k/n per known public bug and version: the probes the bug could answer, and those that
    returned or changed the row."""
    sibling_of = functools.cache(prefix_sibling)  # a few hundred distinct triples
    is_sibling = pd.Series([sibling_of(f, r, h) for f, r, h in zip(
        *_texts(probes, ["fleets", "row_fleet", "home"]), strict=True)], index=probes.index,
        dtype=bool) & probes.path.str.startswith(READ_PREFIXES)
    is_by_id = probes.path.isin(BY_ID_PATHS) & (probes.expected == "deny")
    bugs = []
    for run in runs.itertuples():
        mine = probes.run_id == run.run_id
        info = target_info(traces_root, run.run_id)
        backend = info["backend"]
        sibling, by_id = probes[mine & is_sibling], probes[mine & is_by_id]
        if backend == "crewai":
            bugs.append(("crewAIInc/crewAI#7543: recall matches a scope as a string prefix",
                         info, sibling))
        if backend == "langgraph":
            bugs.append(("CVE-2026-71433 (as filed in issue 23): store search matches a "
                         "namespace prefix across segments", info, sibling))
        if backend == "mem0":
            bugs.append(("mem0 by-id get/update/delete take no identity", info, by_id))
    rows = [{"bug": bug, "backend": info["backend"], "store": info["store"],
             "version": info["version"], "deployment": info["deployment"],
             "k/n returned": fmt_rate(rate(int(part.returned.fillna(False).sum()),
                                           len(part)))}
            for bug, info, part in bugs]
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame.sort_values(["bug", "store", "version", "deployment"],
                                  kind="stable").reset_index(drop=True)
    return Table("backends_known_bugs", "Known public bugs, k/n by version", frame,
                 "n = the matrix probes a bug could answer (read paths naming a fleet, or "
                 "defaulting to a home fleet, that is a strict string prefix of the row's "
                 "fleet; for mem0, by-id probes the policy denies), k = those that returned or "
                 "changed the row; 95% Wilson intervals. version = the package that decides "
                 "the store's behaviour: CVE-2026-71433 is in langgraph-checkpoint-sqlite / "
                 "-postgres (InMemoryStore, in langgraph itself, is not the affected code).")


def _why(reasons: dict[str, str]) -> str:
    """`langgraph, mem0: <reason>; crewai: <other>`, without the envelope's backend prefix."""
    grouped: dict[str, list[str]] = {}
    for backend, reason in reasons.items():
        short = re.sub(r"not supported by this backend \([a-z0-9]+\): ", "", reason)
        grouped.setdefault(short, []).append(backend)
    return "; ".join(f"{', '.join(bs)}: {r}" for r, bs in grouped.items())


def _cell(cell: dict[str, Any] | None) -> str:
    """`gaps/judged gaps, k misses; n/a (k)` of one run and path (a backend_matrix_paths
    row), `-` where the run has no such row."""
    if cell is None:
        return "-"
    judged, gaps = int(cell["judged"]), int(cell["gaps"])
    misses, na = int(cell["misses"]), int(cell["not_applicable"])
    parts = [f"{gaps}/{judged} gaps" + (f", {misses} misses" if misses else "")] if judged else []
    if na:
        parts.append(f"n/a ({na})")
    return "; ".join(parts) or "-"


def build(context: Context) -> SectionOutput:
    """tables/backends.*, tables/backends_matrix.*, figures/backends_leakage.png and
    backends_repro.md under the output directory, and the section of the page."""
    out_dir = Path(context.out_dir)
    results = context.results(EXPERIMENTS)
    try:
        table = replace(backends_table(results, context.traces_root),
                        views=("backend_metric_counts", "backend_matrix_counts",
                               "backend_not_applicable"))
        matrix = replace(matrix_paths_table(results), views=("backend_matrix_paths",))
        probes = _matrix_probes(results, list(_backend_matrix_runs(results).run_id))
        classes, known = (replace(t, views=("backend_matrix_attribution",))
                          for t in attribution_tables(results, context.traces_root, probes))
        judged = judged_probes(results, context.traces_root, probes)
        rates, crossing = (replace(t, views=("backend_matrix_attribution",)) for t in
                           (rates_table(judged), cross_tenant_table(judged)))
        tables = (rates, crossing, known, classes, table, matrix)
        paths = [p for t in tables for p in write_table(t, out_dir / "tables")]
        overview_paths, overview_note = overview_figure(judged, out_dir / "figures")
        figure_paths, figure_note = backends_figure(results, out_dir / "figures", table)
        repro = out_dir / "backends_repro.md"
        repro.write_text(reproductions(results), encoding="utf-8")
        canonical = results.canonical
        runs = tuple(canonical[canonical.profile.map(backend_of).notna()].run_id)
    finally:
        results.con.close()
    notes = [table.note] if table.empty else []
    if figure_note and not table.empty:
        notes.append(f"backends figure: {figure_note}")
    figures = {
        "backends_overview": FigureOutput(
            "backends_overview", "Backends at a glance: matrix gaps per path family, "
            "idiomatic beside strict", overview_paths, note=overview_note,
            views=("backend_matrix_attribution",)),
        "backends_leakage": FigureOutput(
            "backends_leakage", "Leakage by target (canonical runs)", figure_paths,
            note=figure_note, views=("backend_metric_counts",))}
    output = SectionOutput(
        KEY, TITLE,
        "The same experiments behind the wire adapter against other memory systems, each "
        "through its own scoping mechanism, beside the bundled profiles; minimal "
        "reproductions of every leak in backends_repro.md. Its figures are PNG only: this page "
        "and the notebook show them, nothing reads a PDF of them, and the PDFs took as long "
        "again to draw.",
        tables={t.name: t for t in tables}, figures=figures,
        files=[*paths, *overview_paths, *figure_paths, repro], notes=notes,
        views=("backend_metric_counts", "backend_matrix_counts", "backend_not_applicable",
               "backend_matrix_paths", "backend_matrix_attribution"), runs=runs,
        notebook="backends.ipynb")
    return finish(output, context)
