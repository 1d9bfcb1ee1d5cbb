"""The fidelity section's comparison: cells, differing probes and the pairing of runs."""

from __future__ import annotations

import json

import pandas as pd

from fleetprobe.analysis.sections.fidelity.cells import compare_cells
from fleetprobe.analysis.sections.fidelity.document import experiment_lines
from fleetprobe.analysis.sections.fidelity.pairs import pairs

COLUMNS = ["probe_id", "path", "principal", "visibility", "verdict", "what", "status",
           "returned", "error", "op", "who", "row_key", "sent_ms", "answered_ms"]


def answers(*rows: tuple) -> pd.DataFrame:
    """Probe answers; a row without send/answer times is sent at its position, 10 ms long,
    one after another."""
    full = [r if len(r) == len(COLUMNS) else (*r, 100.0 * i, 100.0 * i + 10)
            for i, r in enumerate(rows)]
    return pd.DataFrame(full, columns=COLUMNS)


def test_a_cell_agrees_only_when_every_probe_in_it_agrees() -> None:
    profile = answers(
        ("e1", "get", "t1 own", "scope_team", "ok", None, 200, True, None, "GET", "a", "r1"),
        ("e2", "get", "t1 own", "scope_team", "ok", None, 200, True, None, "GET", "a", "r1"),
        ("e3", "bulk_write", "t0 own", "scope_team", "ok", None, 403, False, "403 no", "POST",
         "z", "r2"),
        ("e4", "search", "t1 homeless", "scope_team", "ok", None, 200, False, None, "POST",
         "h", "r3"))
    engine = answers(
        ("e1", "get", "t1 own", "scope_team", "ok", None, 200, True, None, "GET", "a", "r1"),
        ("e2", "get", "t1 own", "scope_team", "ok", None, 200, True, None, "GET", "a", "r1"),
        ("e3", "bulk_write", "t0 own", "scope_team", "gap", "writes into the fleet", 200,
         True, None, "POST", "z", "r2"),
        ("e4", "search", "t1 homeless", "scope_team", "ok", None, 200, False, None, "POST",
         "h", "r3"),
        ("e4+effect", "search", "t1 own", None, "side_effect", "re-homes the agent", None,
         None, None, None, None, None))
    cells, diffs = compare_cells(profile, engine)
    assert len(cells) == 4
    assert dict(zip(cells.path + "/" + cells.principal, cells.cell, strict=True)) == {
        "bulk_write/t0 own": "differ", "get/t1 own": "agree", "search/t1 homeless": "agree",
        "search/t1 own": "differ"}
    assert list(diffs.probe) == ["e3", "e4+effect"]
    e3 = diffs.iloc[0]
    assert e3.profile.startswith("ok: HTTP 403 not returned")
    assert e3.engine.startswith("gap (writes into the fleet): HTTP 200 returned")
    assert "HTTP 200 where the profile answered HTTP 403" in e3.reason
    assert diffs.iloc[1].profile == "no such verdict"
    assert diffs.iloc[1].reason == "only the engine recorded this verdict"
    # each cell shows each side's verdicts, not only agree / differ
    by = cells.set_index(cells.path + "/" + cells.principal)
    assert by.at["bulk_write/t0 own", "profile verdict"] == "ok 1"
    assert by.at["bulk_write/t0 own", "engine verdict"] == "gap 1"
    assert by.at["get/t1 own", "engine verdict"] == "ok 2"
    assert by.at["search/t1 own", "profile verdict"] == "none 1"


def test_the_headline_has_a_line_per_experiment_and_pair_fitted_and_held_out_apart() -> None:
    runs = pd.DataFrame([{"pair": "p vs e", "fitted": "fitted", "agreeing": 9, "cells": 10},
                         {"pair": "p vs e", "fitted": "held out", "agreeing": 8, "cells": 10}])
    claims = pd.DataFrame([
        {"pair": "p vs e", "profile": "same (holds by design): 1/1", "engine": "differs "
         "(differs): 0/1", "same outcome": "no"},
        {"pair": "p vs e", "profile": "not measured (not measured): -", "engine": "same "
         "(reproduced): 1/1", "same outcome": "no"}])
    separation = [pd.DataFrame({"agree": ["yes", "no"], "pair": "p vs e", "fitted": True})]
    dynamics = [pd.DataFrame({"agree": ["no"], "pair": "p vs e", "fitted": False})]
    lines = experiment_lines(runs, claims, separation, dynamics).set_index("experiment")
    assert list(lines.index) == ["matrix cells", "paper claims (same outcome)",
                                 "separation rates", "dynamics rates"]
    assert lines.at["matrix cells", "fitted"].startswith("9/10")
    assert lines.at["matrix cells", "held out"].startswith("8/10")
    assert lines.at["paper claims (same outcome)", "held out"].startswith("0/1 (0.0%) measured "
                                                                          "on both, 1 on one")
    assert lines.at["separation rates", "fitted"].startswith("1/2")
    assert lines.at["separation rates", "held out"] == "no run"
    assert lines.at["dynamics rates", "held out"].startswith("0/1")


def test_runs_pair_with_their_profile_under_the_same_params() -> None:
    """An engine commit pairs with the profile that stands for it, run for run under the same
    params (seed, world); the fitted seed and world are marked, the others held out."""
    def run(run_id: str, kind: str, label: str, seed: int, profile: str | None = None,
            commit: str | None = None, fleets: int = 3) -> dict:
        params = {"seed": seed, "fleets": fleets, "target": {"kind": kind, "profile": profile},
                  "client": {"max_concurrency": 8 if kind == "engine" else 4}}
        return {"run_id": run_id, "experiment": "matrix", "target_kind": kind,
                "profile": label, "params": json.dumps(params), "complete": True,
                "started_at": run_id, "seed": seed, "engine_commit": commit}
    runs = pd.DataFrame([
        run("1", "engine", "engine 2.29.0 @ b65ecbe", 11, commit="b65ecbe17605f2a8"),
        run("2", "reference", "memclaw-2.29 headers", 11, "memclaw-2.29"),
        run("3", "reference", "memclaw-2.29", 7, "memclaw-2.29"),
        run("4", "reference", "memclaw-2026-05-31", 11, "memclaw-2026-05-31"),
        run("5", "engine", "engine 2.11.0 @ e2d805e", 12, commit="e2d805e8b80a"),
        run("6", "reference", "memclaw-2026-05-30 headers", 12, "memclaw-2026-05-30"),
        run("7", "engine", "my label", 11, commit="e2d805e8b80a", fleets=5),
        run("8", "reference", "memclaw-2026-05-30 headers", 11, "memclaw-2026-05-30",
            fleets=5),
        run("9", "engine", "engine 2.11.0 @ 045039f", 11, commit="045039f3")])
    profiles = {"e2d805e": "memclaw-2026-05-30", "045039f": "memclaw-2026-05-31",
                "b65ecbe": "memclaw-2.29"}
    found = pairs(runs, "matrix", profiles, {"seed": 11, "fleets": 3})
    assert [(p.profile_run.run_id, p.engine_run.run_id, p.fitted) for p in found] == [
        ("8", "7", False), ("6", "5", False), ("4", "9", True), ("2", "1", True)]
    assert found[0].name == "memclaw-2026-05-30 vs e2d805e"


def _dup_pair(e7: tuple, e8: tuple, spans: tuple[tuple, tuple]) -> pd.DataFrame:
    row = ("t2 same_fleet", "scope_agent")
    return answers(("e7", "dup_exact", *row, *e7, "POST", "b", "r9", *spans[0]),
                   ("e8", "dup_exact_fleet", *row, *e8, "POST", "b", "r9", *spans[1]),
                   ("e9", "dup_near", "t1 own", "scope_team", "ok", None, 409, False, "409",
                    "POST", "c", "r9", 0.0, 50.0))


GAP = ("gap", "reveals", 201, True, None)
OK = ("ok", None, 409, False, "409 dup")


def test_duplicate_probes_in_flight_together_are_named_order_dependent() -> None:
    overlapping = ((0.0, 30.0), (10.0, 40.0))
    _, diffs = compare_cells(_dup_pair(GAP, OK, overlapping), _dup_pair(OK, GAP, overlapping))
    reasons = dict(zip(diffs.probe, diffs.reason, strict=True))
    assert reasons["e7"].startswith("order-dependent: the principal sent 2 duplicate probes")
    assert reasons["e8"] == reasons["e7"]
    assert "e9" not in reasons  # another status, the same verdict: no difference


def test_duplicate_probes_sent_one_after_another_did_not_race() -> None:
    chained = ((0.0, 30.0), (30.0, 60.0))
    _, diffs = compare_cells(_dup_pair(GAP, OK, chained), _dup_pair(OK, GAP, chained))
    reasons = dict(zip(diffs.probe, diffs.reason, strict=True))
    assert set(reasons) == {"e7", "e8"}
    assert not any(r.startswith("order-dependent") for r in reasons.values())


def test_a_duplicate_decision_that_differs_is_put_down_to_similarity_scores() -> None:
    """Both targets refuse as a near duplicate but name rows the checker judges apart: the
    reason says the scores decided, from the two answers, and a non-duplicate path keeps the
    plain difference."""
    def side(verdict: str, status: int, named: str) -> pd.DataFrame:
        return answers(("e1", "dup_near", "t1 same_fleet", "scope_agent", verdict, None,
                        status, verdict == "gap", f"{status} Near-duplicate memory exists: "
                        f"{named}", "POST", "b", "r1"),
                       ("e2", "get", "t1 own", "scope_team", verdict, None, 200, True, None,
                        "GET", "a", "r2"))
    _, diffs = compare_cells(side("gap", 409, "x"), side("ok", 409, "y"))
    reasons = dict(zip(diffs.probe, diffs.reason, strict=True))
    assert reasons["e1"].startswith("both refused the write as a near duplicate")
    assert "similarity score" in reasons["e1"]
    assert reasons["e2"] == "same status, different judgement of what came back"
    _, diffs = compare_cells(side("gap", 409, "x"), side("ok", 201, "-"))
    assert diffs.set_index("probe").at["e1", "reason"].startswith(
        "the engine answered HTTP 201 where the profile answered HTTP 409: which row")
