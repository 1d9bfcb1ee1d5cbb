"""Fidelity (issue 21): the bundled server's `memclaw-2.29` profile against MemClaw's engine.

1. The matrix, cell by cell: the engine's canonical matrix run (target kind `engine`) beside
   the bundled run under profile `memclaw-2.29` with the same params apart from the target
   (same seed, world and probes). A cell is (path, principal as the profile's checker labelled
   it, row visibility); each probe is matched by its id, and a cell agrees when every probe in
   it got the same verdict on both targets (a side effect is a verdict of its own: present on
   one side only is a difference). Each difference shows both answers (status, returned,
   the target's error message) and the reason read from them.
2. The paper's claims, claim by claim: each label's verdict (analysis/base/claims.py) for
   the profile's label and the engine's, side by side.
3. Separation: each rate of the separation views, by Wilson overlap.

Written to reports/FIDELITY.md and reports/tables/fidelity_*.{csv,md,tex}.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import duckdb
import pandas as pd

from fleetprobe.analysis.base.claims import judge
from fleetprobe.analysis.base.section import Context, SectionOutput, finish
from fleetprobe.analysis.base.stats import fmt_rate, rate
from fleetprobe.analysis.base.tables import Table, markdown

KEY, TITLE = "fidelity", "Fidelity (engine)"
PROFILE = "memclaw-2.29"
DOCUMENT = "FIDELITY.md"
# params that say how a run was made, not what it measured
RUN_KEYS = ("target", "traces_root", "progress", "client")
NOT_YET = ("Not measured: the traces hold no matrix run against the engine (target kind "
           "`engine`) with a bundled `memclaw-2.29` run of the same params beside it "
           "(`python -m fleetprobe reproduce params/engine.yaml`, docs/engine.md).")
# the experiments whose runs it reads
EXPERIMENTS = ("matrix", "separation", "leakage", "contradiction", "provenance", "propagation")
SEPARATION_VIEWS = ("separation_contamination", "separation_restricted_records",
                    "separation_absence", "separation_attribution", "separation_reserved",
                    "separation_insight_read", "separation_underlying_read")


# ------------------------------------------------------------------------------ pairing


def _world(params: str | None) -> str:
    doc = json.loads(params or "{}")
    return json.dumps({k: v for k, v in doc.items() if k not in RUN_KEYS}, sort_keys=True)


def _profile_of(params: str | None) -> str | None:
    return (json.loads(params or "{}").get("target") or {}).get("profile")


def repeats(runs: pd.DataFrame, profile_run: pd.Series) -> list[str]:
    """Other complete bundled `memclaw-2.29` runs of the same params as `profile_run`."""
    same = runs[(runs.experiment == profile_run.experiment) & (runs.target_kind == "reference")
                & (runs.run_id != profile_run.run_id) & runs.complete]
    return sorted(r.run_id for r in same.itertuples()
                  if _profile_of(r.params) == PROFILE and _world(r.params) ==
                  _world(profile_run.params))


def order_dependent(con: duckdb.DuckDBPyConnection, profile_run: str,
                    others: list[str]) -> set[str]:
    """Probes whose verdict differs between two runs of the profile itself (same world):
    their answer depends on the order concurrent probes landed in, not on the target."""
    base = probe_answers(con, profile_run).set_index("probe_id").verdict
    found: set[str] = set()
    for other in others:
        again = probe_answers(con, other).set_index("probe_id").verdict
        both = base.index.intersection(again.index)
        found |= set(both[base[both] != again[both]])
        found |= set(base.index.symmetric_difference(again.index))
    return found


def pairs(runs: pd.DataFrame, experiment: str) -> list[tuple[pd.Series, pd.Series]]:
    """(profile run, engine run) per engine label: the engine's latest complete run of the
    experiment and the latest complete bundled `memclaw-2.29` run with the same params."""
    runs = runs[(runs.experiment == experiment)].sort_values(["started_at", "run_id"])
    engines = runs[runs.target_kind == "engine"]
    bundled = runs[(runs.target_kind == "reference")
                   & pd.Series([_profile_of(p) == PROFILE for p in runs.params],
                               index=runs.index, dtype=bool)]
    found = []
    for label in sorted(set(engines.profile)):
        mine = engines[engines.profile == label]
        mine = mine[mine.complete] if mine.complete.any() else mine
        engine = mine.iloc[-1]
        same = bundled[pd.Series([_world(p) == _world(engine.params) for p in bundled.params],
                                 index=bundled.index, dtype=bool)]
        same = same[same.complete] if same.complete.any() else same
        if not same.empty:
            found.append((same.iloc[-1], engine))
    return found


# ------------------------------------------------------------------------------ matrix cells


def probe_answers(con: duckdb.DuckDBPyConnection, run_id: str) -> pd.DataFrame:
    """One row per judged probe of a matrix run: its verdict and the answer it was judged on."""
    return con.execute("""
        SELECT v.probe_id, v.path, v.principal, v.visibility, v.verdict, v.what,
               p.status, p.returned, p.error, p.op, p.who, p.row_key,
               epoch_ms(CAST(p.ts AS TIMESTAMP)) - p.latency_ms AS sent_ms,
               epoch_ms(CAST(p.ts AS TIMESTAMP)) AS answered_ms
        FROM events v LEFT JOIN (SELECT * FROM events WHERE run_id = ? AND experiment = 'matrix'
                                 AND phase = 'probe') p ON p.probe_id = v.probe_id
        WHERE v.run_id = ? AND v.experiment = 'matrix' AND v.phase = 'verdict'
        ORDER BY v.probe_id""", [run_id, run_id]).df()


def answer(row: Any | None) -> str:
    """A probe's answer in a few words: verdict, HTTP status, returned, the target's words."""
    if row is None:
        return "no such verdict"
    status = "no answer" if pd.isna(row.status) else f"HTTP {int(row.status)}"
    returned = "" if pd.isna(row.returned) else (" returned" if row.returned else
                                                 " not returned")
    words = f" '{row.error}'" if isinstance(row.error, str) and row.error else ""
    what = f" ({row.what})" if isinstance(row.what, str) and row.what else ""
    if str(row.name).endswith("+effect"):
        return f"side effect{what}"
    return f"{row.verdict}{what}: {status}{returned}{words}"


def racing(answers: pd.DataFrame) -> dict[str, list[str]]:
    """Duplicate probes (paths `dup_*`) of one principal for one row that were in flight at
    the same time, by the recorded send and answer times: probe id -> the paths of its group.
    They write the same words into the same fleet at once, so each answer depends on which
    landed first: a 201, or a 409 naming a sibling probe's copy. Probes sent one after
    another (the matrix chains a row's duplicate probes) never race."""
    dups = answers[answers.path.str.startswith("dup_") & answers.who.notna()
                   & answers.sent_ms.notna()]
    found: dict[str, list[str]] = {}
    for _, group in dups.groupby(["who", "row_key"]):
        spans = list(zip(group.probe_id, group.path, group.sent_ms, group.answered_ms,
                         strict=True))
        for probe, path, sent, answered in spans:
            overlapping = [p for q, p, s, a in spans if q != probe and s < answered and sent < a]
            if overlapping:
                found[probe] = sorted([path, *overlapping])
    return found


def reason(profile: Any | None, engine: Any | None, flaky: bool = False,
           race: list[str] | None = None) -> str:
    """Why two answers differ, from what each target answered: order-dependent when the
    profile's own runs disagree on the probe, or when the principal's duplicate probes of the
    row raced; otherwise the difference itself."""
    if flaky:
        return ("order-dependent: two runs of the profile with the same world disagree on "
                "this probe too (concurrent probes of one row race; which write lands first "
                "decides the answer)")
    if race:
        return (f"order-dependent: the principal sent {len(race)} duplicate probes of this "
                f"row side by side ({', '.join(race)}), writing the same words into one fleet "
                "at once; which copy lands first decides a 201 or a 409, and which copy a "
                "near-duplicate answer names")
    if profile is None or engine is None:
        side = "engine" if profile is None else "profile"
        return f"only the {side} recorded this verdict"
    if _status(profile) != _status(engine):
        return (f"the engine answered HTTP {_status(engine)} where the profile answered "
                f"HTTP {_status(profile)}")
    return "same status, different judgement of what came back"


def _status(row: Any) -> str:
    return "-" if pd.isna(row.status) else str(int(row.status))


def compare_cells(profile: pd.DataFrame, engine: pd.DataFrame, flaky: set[str] | None = None
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, differing probes): every cell with its verdict and agreement, and every probe
    whose verdicts differ with both answers and the reason."""
    races = racing(profile)
    p_by, e_by = (_by_probe(f) for f in (profile, engine))
    probes = sorted(set(p_by) | set(e_by))
    rows, diffs = [], []
    for probe in probes:
        p, e = p_by.get(probe), e_by.get(probe)
        key = p if p is not None else e
        cell = (key.path, key.principal, key.visibility if isinstance(key.visibility, str)
                else "-")
        same = (p is not None and e is not None and p.verdict == e.verdict)
        rows.append((*cell, probe, same))
        if not same:
            diffs.append({"path": cell[0], "principal": cell[1], "visibility": cell[2],
                          "probe": probe, "profile": answer(p), "engine": answer(e),
                          "reason": reason(p, e, probe in (flaky or set()),
                                           races.get(probe))})
    frame = pd.DataFrame(rows, columns=["path", "principal", "visibility", "probe", "same"])
    # a column summed per cell, not a Python function called per cell
    cells = (frame.assign(_differs=~frame.same)
             .groupby(["path", "principal", "visibility"], sort=True)
             .agg(probes=("probe", "size"), differing=("_differs", "sum"))
             .reset_index())
    cells["cell"] = ["agree" if d == 0 else "differ" for d in cells.differing]
    return cells, pd.DataFrame(diffs, columns=["path", "principal", "visibility", "probe",
                                               "profile", "engine", "reason"])


def _by_probe(answers: pd.DataFrame) -> dict[str, SimpleNamespace]:
    """probe id -> its first row, as an object with the row's fields and `name` = the probe
    id (as a row of a frame indexed by probe id has); a frame lookup per probe of thousands
    was most of this section's time."""
    first = answers.drop_duplicates("probe_id")
    return {record["probe_id"]: SimpleNamespace(name=record["probe_id"], **record)
            for record in first.to_dict("records")}


# ------------------------------------------------------------------------------ claims


def claim_rows(results: Any, profile_label: str, engine_label: str) -> pd.DataFrame:
    rows = []
    for claim in results.claims:
        p, e = judge(results, claim, profile_label), judge(results, claim, engine_label)
        if p.status == "not measured" and e.status == "not measured":
            continue
        rows.append({"claim": claim["id"], "section": claim["section"],
                     "paper": p.paper, "profile": f"{p.status}: {p.measured}",
                     "engine": f"{e.status}: {e.measured}",
                     "same verdict": "yes" if p.status == e.status else "no",
                     "engine's reason": e.reason if p.status != e.status else ""})
    return pd.DataFrame(rows)


def separation_rows(results: Any, profile_run: str, engine_run: str) -> pd.DataFrame:
    rows = []
    for view in SEPARATION_VIEWS:
        frame = results.view(view, [profile_run, engine_run])
        keys = [c for c in frame.columns if c not in (
            "run_id", "numerator", "denominator", "hold_visible", "summary_named",
            "misattributed", "stored")]
        for group, part in frame.groupby(keys, sort=True) if keys else [((), frame)]:
            by = part.set_index("run_id")
            if profile_run not in by.index or engine_run not in by.index:
                continue
            p, e = (rate(int(by.numerator[r]), int(by.denominator[r]))
                    for r in (profile_run, engine_run))
            if p.n == 0 and e.n == 0:
                continue
            where = ", ".join(f"{k}={v}" for k, v in zip(
                keys, group if isinstance(group, tuple) else (group,), strict=True))
            agree = p.overlaps(e)
            rows.append({"metric": view.removeprefix("separation_") + (
                f" ({where})" if where else ""), "profile": fmt_rate(p), "engine": fmt_rate(e),
                "agree": "yes" if agree else "no",
                "what each answered": "" if agree else separation_flags(
                    results, view, profile_run, engine_run)})
    return pd.DataFrame(rows)


# the per-answer flags a separation rate is made of (events of its phase), for a difference
SEPARATION_FLAGS = {
    "separation_reserved": ("reserved_check", ("refused", "envelope_ok", "names_route",
                                               "stored")),
    "separation_attribution": ("attribution", ("sales_named", "legal_named")),
}


def separation_flags(results: Any, view: str, profile_run: str, engine_run: str) -> str:
    """Each side's count of every flag the differing rate is made of (from its events)."""
    if view not in SEPARATION_FLAGS:
        return ""
    phase, flags = SEPARATION_FLAGS[view]
    sides = []
    for side, run in (("profile", profile_run), ("engine", engine_run)):
        counts = results.con.execute(
            "SELECT count(*), " + ", ".join(
                f"count(*) FILTER (WHERE CAST({f} AS BOOLEAN))" for f in flags)
            + " FROM events WHERE run_id = ? AND experiment = 'separation' AND phase = ?",
            [run, phase]).fetchone()
        sides.append(f"{side}: " + ", ".join(f"{f} {k}/{counts[0]}" for f, k in zip(
            flags, counts[1:], strict=True)))
    return "; ".join(sides)


# ------------------------------------------------------------------------------ document


def document(pair: tuple[pd.Series, pd.Series], cells: pd.DataFrame, diffs: pd.DataFrame,
             claims: pd.DataFrame, separation: pd.DataFrame,
             separation_pair: tuple[pd.Series, pd.Series] | None) -> str:
    profile, engine = pair
    agreeing, total = int((cells.cell == "agree").sum()), len(cells)
    share = 100.0 * agreeing / total if total else 0.0
    lines = [
        "# Fidelity: the bundled `memclaw-2.29` profile against MemClaw's engine", "",
        f"Matrix: engine run `{engine.run_id}` ({engine.profile}, complete: "
        f"{bool(engine.complete)}) beside profile run `{profile.run_id}` ({profile.profile}, "
        f"complete: {bool(profile.complete)}), same params apart from the target (seed "
        f"{engine.seed}). A cell is (path, principal, row visibility); it agrees when every "
        "probe in it got the same verdict from both targets' checkers.", "",
        f"cells agreeing: {agreeing}/{total} ({share:.1f}%)", "",
        f"Probes compared: {int(cells.probes.sum())}, differing: {len(diffs)}; order-dependent "
        "(two runs of the profile disagree on the probe too, or the principal's duplicate "
        "probes of one row raced): "
        f"{int(diffs.reason.str.startswith('order-dependent').sum()) if len(diffs) else 0}.",
        "",
        "## Differences", "",
        markdown(diffs) if not diffs.empty else "_none_", "",
        "## Paper claims, profile vs engine", "",
        (markdown(claims) if not claims.empty else
         "_no claim measured under both labels_"), "",
        "## Separation, profile vs engine", ""]
    if separation_pair is not None:
        lines += [f"Runs: profile `{separation_pair[0].run_id}`, engine "
                  f"`{separation_pair[1].run_id}`; a rate agrees when the 95% Wilson "
                  "intervals overlap.", "",
                  markdown(separation) if not separation.empty else "_no rates_"]
    else:
        lines.append("_no separation runs of the same params under both targets_")
    lines += ["", "## Every cell", "", markdown(cells[["path", "principal", "visibility",
                                                       "probes", "differing", "cell"]]), ""]
    return "\n".join(lines)


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        matrix_pairs = pairs(results.runs, "matrix")
        if not matrix_pairs:
            return finish(SectionOutput(KEY, TITLE, NOT_YET), context)
        pair = matrix_pairs[0]
        flaky = order_dependent(results.con, pair[0].run_id, repeats(results.runs, pair[0]))
        cells, diffs = compare_cells(probe_answers(results.con, pair[0].run_id),
                                     probe_answers(results.con, pair[1].run_id), flaky)
        claims = claim_rows(results, pair[0].profile, pair[1].profile)
        sep_pairs = pairs(results.runs, "separation")
        separation = (separation_rows(results, sep_pairs[0][0].run_id, sep_pairs[0][1].run_id)
                      if sep_pairs else pd.DataFrame())
    finally:
        results.con.close()
    text = document(pair, cells, diffs, claims, separation,
                    sep_pairs[0] if sep_pairs else None)
    tables = {t.name: t for t in (
        Table("fidelity_cells", "Fidelity: matrix cells, profile vs engine", cells),
        Table("fidelity_differences", "Fidelity: differing probes", diffs,
              note="no differing probe"),
        Table("fidelity_claims", "Fidelity: paper claims, profile vs engine", claims,
              note="no claim measured under both labels"))}
    agreeing, total = int((cells.cell == "agree").sum()), len(cells)
    sentence = (f"The bundled `{PROFILE}` profile against MemClaw's engine, the matrix cell by "
                f"cell (cells agreeing: {agreeing}/{total}), then the paper's claims and "
                "separation side by side. Full text: FIDELITY.md.")
    runs = tuple(sorted({pair[0].run_id, pair[1].run_id,
                         *(r.run_id for p in sep_pairs for r in p)}))
    output = SectionOutput(KEY, TITLE, sentence, tables=tables,
                           files={DOCUMENT: text.encode()}, runs=runs,
                           views=("matrix_verdicts", *SEPARATION_VIEWS),
                           data={"cells": cells, "differences": diffs})
    return finish(output, context)
