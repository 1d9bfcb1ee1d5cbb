"""Governance over time (not in the paper), from the traces alone (metrics.sql `dynamics_*`).

Per target, from its canonical dynamics run: a timeline figure (each change at time 0, every
answer after it by path family, allowed / withheld / returned although the timed policy
denied it), the stale-access windows (change x path), the forget failures with a minimal
reproduction each, the in-flight effects, identity reuse and the MGS table,
MGS = (1 - miss)(1 - leak)(1 - forget_failure) with its parts and their Wilson intervals.
Written to reports/tables/dynamics_*.{csv,md,tex} and reports/figures/dynamics_timeline_*.
"""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from fleetprobe.analysis.base.figures import (  # noqa: E402
    PNG_ONLY,
    FigureOutput,
    save,
    style,
)
from fleetprobe.analysis.base.results import Results  # noqa: E402
from fleetprobe.analysis.base.section import (  # noqa: E402
    REPRODUCTION,
    Context,
    Fragment,
    SectionOutput,
    finish,
)
from fleetprobe.analysis.base.stats import fmt_rate, one_minus_product, rate  # noqa: E402
from fleetprobe.analysis.base.tables import Table  # noqa: E402

KEY, TITLE = "dynamics", "Governance over time"
EXPERIMENTS = ("dynamics",)
VIEWS = ("dynamics_canonical", "dynamics_windows", "dynamics_forget_failures",
         "dynamics_inflight", "dynamics_identity_reuse", "dynamics_mgs_parts",
         "dynamics_timeline", "dynamics_stale", "dynamics_inflight_reads")
NO_RUNS = ("No dynamics runs yet: `python -m fleetprobe run dynamics --params "
           "params/reference/dynamics.yaml` (one profile) or `python -m fleetprobe batch "
           "params/dynamics.yaml` (every bundled profile), then `make report`.")
CHANGE_ORDER = ("revoke_key", "delete_agent", "recreate_agent", "trust_3_1", "trust_2_0",
                "trust_1_3", "rehome", "soft_delete", "soft_delete_single", "expire",
                "redistribute", "inflight_delete", "inflight_revoke", "supersede_rdf",
                "supersede_semantic", "valid_end", "soft_delete_derived")
FAMILY_MARKERS = {"by id": "o", "list": "s", "search": "^", "derived": "D", "write": "v"}
OUTCOME_COLOURS = {"allowed, returned": "#4c72b0", "withheld or refused": "#bbbbbb",
                   "returned, no longer current": "#dd8452",
                   "returned, policy denies": "#c44e52"}
# a minimal reproduction per path (plan names; the run's nonce prefixes every id on the wire)
REPRODUCTION_OF = {
    "get": "GET /api/v1/memories/<id of {row}>",
    "list": "GET /api/v1/memories?agent_id=<owner of {row}>",
    "search": 'POST /api/v1/search {{"query":"<content of {row}>"}}',
    "recall": 'POST /api/v1/recall {{"query":"<content of {row}>"}}',
    "entity": "GET /api/v1/entities/<entity linked to {row}>",
    "dup_exact": 'POST /api/v1/memories {{"content":"<content of {row}>"}}',
    "bulk_attempt": "POST /api/v1/memories/bulk with the X-Bulk-Attempt-Id that wrote {row}",
    "idempotency": "POST /api/v1/memories with the Idempotency-Key that wrote {row}",
    "write": 'POST /api/v1/memories {{"fleet_id":"<fleet of {row}>","content":"..."}}',
    "bulk_write": 'POST /api/v1/memories/bulk {{"fleet_id":"<fleet of {row}>","items":[...]}}',
    "contradiction_record": "GET /api/v1/memories/<id of the row {row} superseded>/contradictions",
    "insight": "GET /api/v1/memories/<id of the insight naming {row}>",
    "recall_summary": 'POST /api/v1/recall {{"query":"<content of {row}>"}} (its summary)',
}
CHANGE_STEP = {
    "revoke_key": "POST /api/v1/admin/agent-keys/provision for {who} (its old key revoked)",
    "delete_agent": "DELETE /api/v1/agents/{who}",
    "recreate_agent": "DELETE /api/v1/agents/{who}, then provision {who} again",
    "trust_3_1": "PATCH /api/v1/agents/{who}/trust {{\"trust_level\":1}}",
    "trust_2_0": "PATCH /api/v1/agents/{who}/trust {{\"trust_level\":0}}",
    "trust_1_3": "PATCH /api/v1/agents/{who}/trust {{\"trust_level\":3}}",
    "rehome": "PATCH /api/v1/agents/{who}/trust {{\"fleet_id\":\"<another fleet>\"}}",
    "soft_delete": "DELETE /api/v1/memories/<id of {row}>",
    "soft_delete_single": "DELETE /api/v1/memories/<id of {row}>",
    "expire": "write {row} with expires_at a moment ahead, wait past it",
    "redistribute": "POST /api/v1/memories/redistribute (hand {row} to a sibling)",
    "supersede_rdf": "write {row} with a triple, then a row with the same subject and "
                     "predicate and another object",
    "supersede_semantic": "write {row}, then a row denying it",
    "valid_end": "write {row} with ts_valid_end a moment ahead, wait past it",
    "soft_delete_derived": "write two rows with one subject, one single-valued predicate "
                           "and two objects ({row} the later); POST /api/v1/insights/generate "
                           '{{"focus":"contradictions","scope":"fleet"}} by a trust-2 agent; '
                           "DELETE /api/v1/memories/<id of {row}>",
}


def canonical_runs(results: Results) -> pd.DataFrame:
    runs = results.view("dynamics_canonical")
    return runs.sort_values(["profile", "target_kind"]).reset_index(drop=True)


def _label(profile: str, target_kind: str) -> str:
    return profile if target_kind == "reference" else f"{profile} ({target_kind})"


# the joint confidence of MGS's interval (stats.one_minus_product)
MGS_LEVEL = 0.95


def mgs_table(results: Results, run_ids: list[str]) -> Table:
    parts = results.view("dynamics_mgs_parts", run_ids)
    rows = []
    for p in parts.sort_values("profile").itertuples():
        counts = {"miss": (p.miss_k, p.miss_n), "leak": (p.leak_k, p.leak_n),
                  "forget failure": (p.forget_k, p.forget_n)}
        mgs = one_minus_product(list(counts.values()), MGS_LEVEL)
        rows.append({
            "target": p.profile,
            "MGS": round(mgs.value, 3) if mgs.parts else None,
            f"MGS {MGS_LEVEL:.0%} interval": (f"[{mgs.low:.3f}, {mgs.high:.3f}]" if mgs.parts
                                              else "-"),
            **{name: fmt_rate(rate(k, n)) if n else "n/a (no trials)"
               for name, (k, n) in counts.items()},
            "n/a": int(p.not_applicable), "errors": int(p.errors), "run": p.run_id})
    return Table("dynamics_mgs", "Dynamics: MGS = (1 - miss)(1 - leak)(1 - forget failure)",
                 pd.DataFrame(rows), NO_RUNS if not rows else (
                     "miss: allowed reads a must-return path withheld, over allowed reads; "
                     "leak: answers the timed policy denies that returned, revealed or wrote "
                     "(an in-flight bulk counts once), over denied answers; forget failure: "
                     "answers after a soft-delete or expiry that returned the row or a derived "
                     "artefact naming it, over those answers. Each part: k/n and its 95% "
                     f"Wilson interval. MGS's {MGS_LEVEL:.0%} interval: the product of the "
                     f"parts' Wilson intervals, each at 1 - {1 - MGS_LEVEL:.2f}/m for the m "
                     "parts with trials (Bonferroni), "
                     "so it holds jointly. A part with no trials is not applicable (n/a): it "
                     "is left out of the product (a factor of 1 with no width), so MGS is "
                     "over the measured parts only and says nothing about that one; the "
                     "`n/a` column counts probes the target could not be asked."),
                 ("dynamics_mgs_parts",))


def view_table(results: Results, run_ids: list[str], view: str, name: str, title: str,
               note: str, ms_columns: tuple[str, ...] = ()) -> Table:
    """A table that is its metric view over the runs (times rounded to 0.1 ms)."""
    frame = results.view(view, run_ids).drop(columns="run_id")
    frame = frame.round(dict.fromkeys(ms_columns, 1))
    return Table(name, title, frame, NO_RUNS if frame.empty else note, (view,))


def windows_table(results: Results, run_ids: list[str]) -> Table:
    return view_table(
        results, run_ids, "dynamics_windows", "dynamics_windows",
        "Dynamics: stale-access windows per change and path",
        "One series = one prober's path to one row across one change, counted "
        "where the timed policy denies it after the change. p50/p99/max: time "
        "from the change's acknowledgement to the first denial, over the series "
        "denied (bounded below by the probe rounds' pace); never_denied: series "
        "still answered while probed; stale_answers: answers after the change "
        "the policy denies that returned the row or wrote.",
        ("p50_ms", "p99_ms", "max_ms", "last_stale_ms"))


def forget_table(results: Results, run_ids: list[str]) -> Table:
    frame = results.view("dynamics_forget_failures", run_ids)
    frame = frame[frame.numerator > 0].copy()
    frame["reproduction"] = [_reproduction(c, p, e) for c, p, e in
                             zip(frame.change, frame.path, frame.example_probe, strict=True)]
    frame = frame.drop(columns="run_id")
    return Table("dynamics_forget", "Dynamics: forget failures, with a minimal reproduction",
                 frame, "No forget failure in any dynamics run." if frame.empty else (
                     "A row soft-deleted or past its expires_at, or an artefact derived from "
                     "it, returned after the change (numerator) over the answers the policy "
                     "denies after it (denominator); example_probe: <change>.<probe>.<round> "
                     "in the run's events."), ("dynamics_forget_failures",))


def _reproduction(change: str, path: str, example: str | None) -> str:
    step = CHANGE_STEP.get(change, change).format(who="<agent>", row="<row>")
    probe = REPRODUCTION_OF.get(path, path).format(row="<row>")
    return f"{step}; then {probe}"


def inflight_table(results: Results, run_ids: list[str]) -> Table:
    return view_table(
        results, run_ids, "dynamics_inflight", "dynamics_inflight",
        "Dynamics: writes in flight across a revocation",
        "A bulk of planned_items items sent with an agent's own key; once its "
        "first row is stored the agent is deleted (inflight_delete) or its key "
        "re-issued (inflight_revoke). written_after: rows stored under the agent's "
        "id after the change was acknowledged (server created_at); written_count: "
        "how many items the server says it wrote before stopping, where it says.")


def reuse_table(results: Results, run_ids: list[str]) -> Table:
    frame = results.view("dynamics_identity_reuse", run_ids)
    frame = frame[frame.denominator > 0].drop(columns="run_id")
    return Table("dynamics_identity_reuse",
                 "Dynamics: what a re-created agent id inherits of its predecessor's rows",
                 frame, NO_RUNS if frame.empty else (
                     "An agent is deleted and provisioned again under the same id; its "
                     "predecessor's private row read by the new agent (numerator) over the "
                     "answers after the re-creation (the policy: a new id inherits nothing it "
                     "did not own)."), ("dynamics_identity_reuse",))


def stale_table(results: Results, run_ids: list[str]) -> Table:
    return view_table(
        results, run_ids, "dynamics_stale", "dynamics_stale",
        "Dynamics: stale answers after supersession and lifecycle",
        "A row superseded by a later write (RDF: same subject and single-valued "
        "predicate, another object; semantic: a sentence denying it) or past its "
        "ts_valid_end (MemClaw's lifecycle job archive-expired outdates it). "
        "The policy still allows reading it; search, recall and a recall summary "
        "promise to hide it. One series = one prober's path across one change; "
        "p50/p99/max: time from the change (the later write's 201, or "
        "ts_valid_end) to the first answer without the row; never_current: "
        "series served stale as long as probed; target_marked / marked_ms: "
        "whether and when the target itself marked the row (outdated, conflicted; "
        "empty: not watched). Not part of MGS: a stale answer is not a leak.",
        ("p50_ms", "p99_ms", "max_ms", "marked_ms"))


def inflight_reads_table(results: Results, run_ids: list[str]) -> Table:
    return view_table(
        results, run_ids, "dynamics_inflight_reads", "dynamics_inflight_reads",
        "Dynamics: reads in flight across a change",
        "A search or recall of the change's own probes sent just before the "
        "change was requested. straddled: answered after the change was "
        "acknowledged; returned_after_denied: of those, answers that returned the "
        "row although the world after the change denies it (the timed policy "
        "judges them may: the server may have read before the change); leaks: "
        "answers the policy denies either way.")


def timeline_figure(results: Results, run_id: str, label: str, out_dir: Path,
                    target_kind: str = "reference") -> FigureOutput:
    """Each change at 0 ms; every answer to its probes by family and outcome. A change with
    no judged answer keeps its (empty) row, so every target's figure has the same rows."""
    frame = results.view("dynamics_timeline", [run_id])
    name = f"dynamics_timeline_{label.replace(' ', '_').replace('(', '').replace(')', '')}"
    changes = list(CHANGE_ORDER)
    judged = set(frame.change.tolist())
    empty = [c for c in changes if c not in judged]
    frame = frame.assign(outcome=[
        "returned, policy denies" if v == "leak" else
        "returned, no longer current" if v == "stale" else
        "allowed, returned" if r else "withheld or refused"
        for v, r in zip(frame.verdict.tolist(), frame.returned.tolist(), strict=True)])
    with style():
        fig, ax = _timeline_axes()
        offsets = {f: (i - 2) * 0.13 for i, f in enumerate(FAMILY_MARKERS)}
        for (family, outcome), group in frame.groupby(["family", "outcome"]):
            y = [changes.index(c) + offsets.get(family, 0) for c in group.change.tolist()]
            ax.scatter(group.since_change_ms.clip(lower=-5000), y, s=14, alpha=0.7,
                       marker=FAMILY_MARKERS.get(family, "o"),
                       color=OUTCOME_COLOURS[outcome], linewidths=0)
        ax.set_xscale("symlog", linthresh=10)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        fig.subplots_adjust(**timeline_margins())
        caption = (f"{label}: {len(frame)} judged answers of run {run_id}, each at its answer "
                   "time relative to its change's acknowledgement; red = the timed policy "
                   "denies what the answer returned; orange = a search-like path served a "
                   "row superseded or past its ts_valid_end.")
        if target_kind == "backend":
            caption += (" An empty row is n/a for this backend's paths: the change or its "
                        "probes need what the backend does not have (docs/backends.md; the "
                        "run's manifest says which, in the backend's words).")
        elif empty:
            caption += (f" Empty rows, no judged answer (n/a on this target, or not in the "
                        f"run's plan): {', '.join(empty)}.")
        return save(fig, out_dir, name, f"Dynamics timeline: {label}", caption,
                    ("dynamics_timeline",), formats=PNG_ONLY)


def _timeline_axes() -> tuple[plt.Figure, plt.Axes]:
    """A timeline's figure and axes with everything but the answers: a row per change, the
    change line at 0, the axis label and the legend (the same on every target's figure)."""
    changes = list(CHANGE_ORDER)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(changes) + 2))
    ax.axvline(0, color="black", linewidth=1)
    ax.set_yticks(range(len(changes)), changes)
    ax.set_ylim(len(changes) - 0.5, -0.5)  # the first change on top
    ax.set_xlabel("ms since the change was acknowledged (symlog; the black line: the change)")
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=o)
               for o, c in OUTCOME_COLOURS.items()]
    handles += [plt.Line2D([], [], marker=m, linestyle="", color="0.3", label=f)
                for f, m in FAMILY_MARKERS.items()]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return fig, ax


@functools.cache
def timeline_margins() -> dict[str, float]:
    """The timelines' subplot margins, from one tight layout of an empty timeline: every
    target's figure has the same row labels, axis label and legend, so laying each one out
    again (a dry draw apiece) would give the same margins for the CPU of a third figure."""
    with style():
        fig, ax = _timeline_axes()
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlim(-5000, 100000)
        fig.tight_layout(rect=(0, 0.06, 1, 0.95))
        params = fig.subplotpars
        margins = {k: getattr(params, k) for k in ("left", "right", "top", "bottom")}
        plt.close(fig)
    return margins


def markdown_section(tables: list[Table]) -> str:
    """REPRODUCTION.md's part: the first table (MGS) in full; each other table by its note
    and where it is (tables/<name>.md and .csv), which keeps the page readable and short."""
    parts = [f"## {TITLE}"]
    for i, table in enumerate(tables):
        if table.empty:
            body = f"_{table.note}_"
        elif i == 0:
            body = table.markdown + f"\n\n{table.note}"
        else:
            body = (f"{len(table.frame):,} rows: `tables/{table.name}.md` "
                    f"(every row: `tables/{table.name}.csv`). {table.note}")
        parts.append(f"### {table.title}\n\n{body}")
    return "\n\n".join(parts) + "\n"


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    figures: dict[str, FigureOutput] = {}
    try:
        runs = canonical_runs(results)
        ids = list(runs.run_id)
        tables = [mgs_table(results, ids), windows_table(results, ids),
                  stale_table(results, ids), forget_table(results, ids),
                  inflight_table(results, ids), inflight_reads_table(results, ids),
                  reuse_table(results, ids)]
        for run in runs.itertuples():
            figure = timeline_figure(results, run.run_id, _label(run.profile, run.target_kind),
                                     context.out_dir / "figures", run.target_kind)
            figures[figure.name] = figure
    finally:
        results.con.close()
    output = SectionOutput(
        KEY, TITLE,
        "Not a claim of the paper: a timeline of changes (revocation, deletion, re-creation, "
        "trust and home changes, soft-delete, expiry, redistribution, supersession, the "
        "lifecycle's ts_valid_end, deletion of a row insights were derived from, bulk writes "
        "and reads in flight), "
        "each answer judged by the policy at the moment the server gave it.",
        tables={t.name: t for t in tables}, figures=figures,
        fragments=[Fragment(REPRODUCTION, 110, markdown_section(tables))],
        notes=[NO_RUNS] if not ids else [], notebook="dynamics.ipynb", views=VIEWS,
        runs=tuple(ids))
    return finish(output, context)
