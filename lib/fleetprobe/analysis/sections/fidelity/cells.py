"""The matrix, cell by cell: a bundled profile's run beside an engine's run of the same params
(same seed, world and probes). A cell is (path, principal as the checker labelled it, row
visibility); each probe is matched by its id, and a cell agrees when every probe in it got the
same verdict on both targets (a side effect is a verdict of its own: present on one side only
is a difference). Each difference shows both answers (status, returned, the target's error
message) and the reason read from them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import duckdb
import pandas as pd

from fleetprobe.analysis.sections.fidelity.pairs import same_world


def repeats(runs: pd.DataFrame, profile_run: pd.Series, profile: str) -> list[str]:
    """Other complete runs of bundled `profile` with the same params as `profile_run`."""
    same = runs[(runs.experiment == profile_run.experiment) & (runs.target_kind == "reference")
                & (runs.run_id != profile_run.run_id) & runs.complete]
    return sorted(r.run_id for r in same.itertuples()
                  if same_world(r.params, profile_run.params, profile))


def order_dependent(con: duckdb.DuckDBPyConnection, profile_answers: pd.DataFrame,
                    others: list[str]) -> set[str]:
    """Probes whose verdict differs between two runs of the profile itself (same world; the
    first run's `probe_answers` given): their answer depends on the order concurrent probes
    landed in, not on the target."""
    base = profile_answers.set_index("probe_id").verdict
    found: set[str] = set()
    for other in others:
        again = probe_answers(con, other).set_index("probe_id").verdict
        both = base.index.intersection(again.index)
        found |= set(both[base[both] != again[both]])
        found |= set(base.index.symmetric_difference(again.index))
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
    statuses = {_status(profile), _status(engine)}
    if str(profile.path).startswith("dup") and statuses <= {"201", "409"}:
        # both decided a duplicate question on their own similarity scores: the engine
        # embeds with its offline `fake` provider, the profile with the kit's embedder
        seen = {"409": "both refused the write as a near duplicate, naming rows the checker "
                       "judges apart",
                "201": "both wrote the row; the near duplicates they named the checker "
                       "judges apart"}.get(
            _status(profile) if len(statuses) == 1 else "",
            f"the engine answered HTTP {_status(engine)} where the profile answered "
            f"HTTP {_status(profile)}")
        return (f"{seen}: which row is nearest, and whether it passes the threshold, is each "
                "target's own similarity score (different embedders, docs/engine.md)")
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
    keys = ["path", "principal", "visibility"]
    # every probe of either side in one frame (probe ids sorted), its cell from the profile's
    # row where there is one; row objects only for the few that differ
    sides = [f.drop_duplicates("probe_id").set_index("probe_id")[[*keys, "verdict"]]
             for f in (profile, engine)]
    both = sides[0].add_suffix("_p").join(sides[1].add_suffix("_e"), how="outer", sort=True)
    present = [both.index.isin(side.index) for side in sides]
    cell = {k: both[f"{k}_p"].where(present[0], both[f"{k}_e"]) for k in keys}
    verdicts = [both[f"verdict_{x}"].astype(str).where(present[i], "none")
                for i, x in enumerate("pe")]
    same = present[0] & present[1] & (both.verdict_p == both.verdict_e).to_numpy()
    frame = pd.DataFrame({
        "path": cell["path"], "principal": cell["principal"],
        "visibility": [v if isinstance(v, str) else "-" for v in cell["visibility"]],
        "probe": both.index, "same": same, "profile verdict": verdicts[0],
        "engine verdict": verdicts[1]}).reset_index(drop=True)
    races = racing(profile)
    differing = list(frame.probe[~frame.same])
    p_by, e_by = (_by_probe(f[f.probe_id.isin(differing)]) for f in (profile, engine))
    diffs = []
    for row in frame[~frame.same].itertuples(index=False):
        p, e = p_by.get(row.probe), e_by.get(row.probe)
        diffs.append({"path": row.path, "principal": row.principal,
                      "visibility": row.visibility, "probe": row.probe,
                      "profile": answer(p), "engine": answer(e),
                      "reason": reason(p, e, row.probe in (flaky or set()),
                                       races.get(row.probe))})
    # a column summed per cell, not a Python function called per cell
    cells = (frame.assign(_differs=~frame.same)
             .groupby(keys, sort=True)
             .agg(probes=("probe", "size"), differing=("_differs", "sum"))
             .reset_index())
    cells["cell"] = ["agree" if d == 0 else "differ" for d in cells.differing]
    for side in ("profile verdict", "engine verdict"):  # each cell's verdicts on each side
        counts = frame.groupby([*keys, side], sort=True).size().reset_index(name="_n")
        counts["_text"] = counts[side] + " " + counts._n.astype(str)
        joined = counts.groupby(keys, sort=True)._text.agg(", ".join).rename(side)
        cells = cells.merge(joined.reset_index(), on=keys, how="left")
    return cells, pd.DataFrame(diffs, columns=["path", "principal", "visibility", "probe",
                                               "profile", "engine", "reason"])


def _by_probe(answers: pd.DataFrame) -> dict[str, SimpleNamespace]:
    """probe id -> its first row, as an object with the row's fields and `name` = the probe
    id (as a row of a frame indexed by probe id has); a frame lookup per probe of thousands
    was most of this section's time."""
    first = answers.drop_duplicates("probe_id")
    return {record["probe_id"]: SimpleNamespace(name=record["probe_id"], **record)
            for record in first.to_dict("records")}
