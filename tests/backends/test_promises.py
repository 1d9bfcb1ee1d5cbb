"""Each backend judged by its own promise (issue 37): the promises cite their pages, the
verdict rules never call a missing feature a bug, and on the committed traces the SQL view's
causes agree with the attribution rule and every gap gets exactly one verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleetprobe.analysis.base.catalogues import catalogue
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import backends
from fleetprobe.analysis.sections.backends import promises

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
PROMISES = catalogue("backend_promises")
URL = re.compile(r"^https://\S+$")
THREE = {"breaks_promise", "lacks_feature", "adapter_mapping"}


@pytest.mark.parametrize("backend", sorted(PROMISES["backends"]))
def test_each_promise_cites_its_pages(backend: str) -> None:
    entry = PROMISES["backends"][backend]
    assert entry["scoping"] and len(entry["promise"].split()) > 20
    assert entry["sources"] and all(URL.match(s["url"]) and s["says"] for s in entry["sources"])
    assert set(entry["deployments"]) == {"idiomatic", "strict"}
    assert entry["lacks"] and set(entry["lacks"]) <= set(PROMISES["features"])


def test_no_rule_calls_a_missing_feature_a_bug() -> None:
    """A bug rests on the backend's own promise, never on a feature or a mapping; a missing
    feature's rule names a feature the backend is listed as lacking."""
    for rule in PROMISES["verdict_rules"]:
        verdict, basis = rule["verdict"], rule["basis"]
        assert verdict in THREE, rule
        if verdict == "breaks_promise":
            assert basis == "promise", rule
        elif verdict == "lacks_feature":
            assert basis in PROMISES["features"], rule
            lacking = [b for b, e in PROMISES["backends"].items() if basis in e["lacks"]]
            assert (rule.get("backend") in lacking) if rule.get("backend") else lacking, rule
        else:
            assert basis in PROMISES["mappings"], rule


def test_known_bugs_name_their_source_and_whether_it_was_read() -> None:
    for bug in PROMISES["known_bugs"]:
        assert bug["backend"] in PROMISES["backends"]
        assert URL.match(bug["source"]) and bug["read_here"].split(":")[0] in {"yes", "no"}
        assert all(URL.match(u) for u in bug.get("read_instead") or [])
        if bug["read_here"].startswith("no"):  # then something else was read in its place
            assert bug["read_instead"]
    # mem0's by-id calls are its documented API: listed as not a bug, never as a known bug
    assert "mem0" not in {b["backend"] for b in PROMISES["known_bugs"]}
    assert all(URL.match(n["source"]) for n in PROMISES["not_bugs"])


@pytest.fixture(scope="module")
def committed() -> Results:
    results = Results.load(TRACES, experiments=("matrix",))
    if backends._backend_matrix_runs(results).empty:
        results.con.close()
        pytest.skip("no backend matrix runs committed")
    yield results
    results.con.close()


def test_every_backend_gap_gets_one_cause_and_one_verdict(committed: Results) -> None:
    """backend_promise_verdicts judges each gap of backend_gap_classes once: the same probes,
    no probe twice, none left unclassified."""
    gaps = committed.con.execute(
        "SELECT run_id, probe_id FROM backend_gap_classes JOIN runs USING (run_id) "
        "WHERE profile LIKE 'backend-%' ORDER BY ALL").fetchall()
    judged = committed.con.execute(
        "SELECT run_id, probe_id, promise_verdict FROM backend_promise_verdicts "
        "ORDER BY run_id, probe_id").fetchall()
    assert gaps and [g for g in gaps] == [(r, p) for r, p, _ in judged]
    assert {v for _, _, v in judged} <= THREE


def test_committed_verdicts_split_three_ways(committed: Results) -> None:
    """Every gap one verdict (the table checks the sums); what the backends lack (write gate,
    trust ladder, redistribute) is never in the bug count; no gap left unclassified."""
    table, bases, rows = promises.verdict_tables(committed, TRACES)
    assert not rows.empty and set(rows.promise_verdict) <= THREE
    no_feature = rows[rows.cause.isin(["write", "named_fleet", "after_redistribute"])
                      & ~rows.sibling]
    # never a bug: a missing feature, or (Cognee's idiomatic tenant-wide grant) the mapping
    assert not no_feature.empty
    assert set(no_feature.promise_verdict) <= {"lacks_feature", "adapter_mapping"}
    mapped = no_feature[no_feature.promise_verdict == "adapter_mapping"]
    assert set(mapped.basis) <= set(PROMISES["mappings"])
    bugs = rows[rows.promise_verdict == "breaks_promise"]
    assert set(bugs.basis) == {"promise"}
    lacks = {(b, f) for b, e in PROMISES["backends"].items() for f in e["lacks"]}
    missing = rows[rows.promise_verdict == "lacks_feature"]
    assert all((b, f) in lacks for b, f in zip(missing.backend, missing.basis, strict=True))
    frame = table.frame
    bug = promises.VERDICTS["breaks_promise"]
    assert int(frame[bug].sum()) == len(bugs)
    # mem0's by-id calls take no identity by design: none of its gaps is a bug
    assert int(frame[frame.backend == "mem0"][bug].sum()) == 0
    assert int(bases.frame.gaps.sum()) == len(rows)


def test_a_verdict_table_that_lost_a_gap_is_refused(committed: Results) -> None:
    rows = promises.verdict_rows(committed, TRACES)
    run_ids = list(backends._backend_matrix_runs(committed).run_id)
    promises._check(committed, rows, run_ids)  # as built: consistent
    with pytest.raises(ValueError, match="verdicts sum to"):
        promises._check(committed, rows.iloc[1:], run_ids)
