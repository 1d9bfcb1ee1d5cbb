"""History checkers on hand-made event lists: each passes on a clean history and fails on
the history that breaks its property (so none of them is a test that cannot fail)."""

from __future__ import annotations

from typing import Any

import pytest

from fleetprobe.oracle import checkers
from fleetprobe.oracle.checkers import CheckResult, check_all

T0 = "2026-12-01T12:00:00.000000Z"


def at(seconds: float) -> str:
    whole, frac = divmod(seconds, 1)
    return f"2026-12-01T12:00:{int(whole):02d}.{int(round(frac * 1e6)):06d}Z"


def ev(phase: str, **fields: Any) -> dict[str, Any]:
    return {"phase": phase, "ts": fields.pop("ts", T0), "status": fields.pop("status", None),
            "error": fields.pop("error", None), **fields}


def write(rid: str, memory_id: str | None, answered: float = 1.0, **kw: Any) -> dict:
    return ev("write", request_id=rid, memory_id=memory_id,
              acknowledged=memory_id is not None, answered_at=at(answered),
              status=201 if memory_id else 503, **kw)


def row(memory_id: str, rid: str | None = None, status: str = "active",
        supersedes: str | None = None, subject: str | None = None,
        predicate: str | None = None) -> dict:
    return ev("audit", memory_id=memory_id, request_id=rid, row_status=status,
              supersedes_id=supersedes, subject_entity_id=subject, predicate=predicate)


def attempt(rid: str, n: int, status: int | None, answered: float, fault: str | None = None,
            error: str | None = None) -> dict:
    return ev("attempt", request_id=rid, attempt=n, status=status, fault_id=fault,
              error=error, sent_at=at(answered - 0.01), answered_at=at(answered))


def test_check_result_event_fields() -> None:
    result = CheckResult("x", 3, [f"v{i}" for i in range(9)])
    assert not result.ok
    assert result.as_event() == {"checker": "x", "ok": False, "checked": 3, "violations": 9,
                                 "examples": ["v0", "v1", "v2", "v3", "v4"]}


def test_no_lost_writes() -> None:
    history = [write("w1", "m1"), write("w2", "m2"), write("w3", None), row("m1", "w1")]
    result = checkers.no_lost_writes(history)
    assert result.checked == 2 and not result.ok
    assert result.violations == ["write w2 acknowledged as m2 is not stored"]
    assert checkers.no_lost_writes([*history, row("m2", "w2")]).ok


def test_no_duplicate_rows() -> None:
    clean = [write("w1", "m1"), row("m1", "w1")]
    assert checkers.no_duplicate_rows(clean).ok
    duplicated = checkers.no_duplicate_rows([*clean, row("m9", "w1")])
    assert duplicated.violations == ["write w1 is stored 2 times: m1, m9"]
    swapped = checkers.no_duplicate_rows([write("w1", "m1"), row("m2", "w1")])
    assert swapped.violations == ["write w1 was acknowledged as m1 but stored as m2"]


def read(rid: str, wrid: str, memory_id: str, sent: float, found: bool,
         status: int = 200) -> dict:
    return ev("read", request_id=rid, write_request_id=wrid, memory_id=memory_id,
              sent_at=at(sent), found=found, status=status)


def test_bounded_staleness() -> None:
    history = [write("w1", "m1", answered=1.0),
               read("r1", "w1", "m1", sent=1.2, found=False),   # inside the window: not judged
               read("r2", "w1", "m1", sent=1.4, found=False, status=503),  # no answer
               read("r3", "w1", "m1", sent=2.0, found=True)]
    result = checkers.bounded_staleness(history, window_s=0.5)
    assert result.ok and result.checked == 1
    stale = checkers.bounded_staleness(
        [*history, read("r4", "w1", "m1", sent=3.0, found=False, status=404)], window_s=0.5)
    assert stale.checked == 2 and len(stale.violations) == 1
    assert stale.violations[0].startswith("read r4 started 2.000 s after write w1")


def test_supersession_acyclic() -> None:
    chain = [row("a"), row("b", supersedes="a"), row("c", supersedes="b")]
    assert checkers.supersession_acyclic(chain).ok
    cyclic = checkers.supersession_acyclic(
        [row("a", supersedes="c"), row("b", supersedes="a"), row("c", supersedes="b"),
         row("d", supersedes="a")])
    assert cyclic.violations == ["supersession cycle: a -> c -> b -> a"]
    assert not checkers.supersession_acyclic([row("s", supersedes="s")]).ok


def test_one_active_head() -> None:
    s, p = "subj-1", "region"
    good = [row("a", status="outdated", subject=s, predicate=p),
            row("b", status="active", supersedes="a", subject=s, predicate=p),
            row("x")]  # no triple: not judged
    result = checkers.one_active_head(good)
    assert result.ok and result.checked == 1
    two = checkers.one_active_head([*good, row("c", status="active", subject=s,
                                                predicate="Region")])
    assert two.violations == ["subject subj-1 predicate region: 2 active rows (b, c)"]
    none = checkers.one_active_head([row("a", status="outdated", subject=s, predicate=p)])
    assert none.violations == ["subject subj-1 predicate region: 0 active rows (none)"]


def test_failures_accounted() -> None:
    kill = ev("fault", fault_id="k001", fault_kind="kill", ts=at(5.0))
    restart = ev("fault", fault_id="k001r", fault_kind="restart", ts=at(6.0))
    injected = ev("fault", fault_id="f00001", fault_kind="error_5xx", ts=at(1.0))
    history = [
        injected, kill, restart,
        attempt("w1", 1, 502, 1.0, fault="f00001"), attempt("w1", 2, 201, 1.5),
        attempt("w2", 1, None, 5.5, error="transport: ConnectError"),   # during the outage
        attempt("w2", 2, None, 7.5, error="transport: ReadError"),      # within the slack
        attempt("w2", 3, 201, 8.5),
        write("w1", "m1"), write("w2", "m2"),
    ]
    result = checkers.failures_accounted(history, kill_slack_s=2.0)
    assert result.ok and result.checked == 3
    # a 500 no fault explains: the server's own bug
    unexplained = checkers.failures_accounted(
        [*history, attempt("w3", 1, 500, 3.0), attempt("w3", 2, 201, 3.2),
         write("w3", "m3")], kill_slack_s=2.0)
    assert unexplained.violations == [
        "attempt 1 of w3 (None) has no injected fault and no outage to explain it"]
    # an injected reset that the harness silently dropped (no retry, reported as success)
    dropped = checkers.failures_accounted(
        [ev("fault", fault_id="f00002", fault_kind="reset", ts=at(2.0)),
         attempt("w4", 1, None, 2.0, fault="f00002", error="transport: ReadError"),
         write("w4", "m4")], kill_slack_s=2.0)
    assert dropped.violations == [
        "attempt 1 of w4 (transport: ReadError) was neither retried nor reported as a "
        "failure"]
    # reported as the final failure of the write: accounted
    reported = [ev("fault", fault_id="f00003", fault_kind="reset", ts=at(2.0)),
                attempt("w5", 1, None, 2.0, fault="f00003", error="transport: ReadError"),
                write("w5", None)]
    assert checkers.failures_accounted(reported).ok
    # outside the slack after the restart: no longer explained by the outage
    late = checkers.failures_accounted(
        [kill, restart, attempt("w6", 1, None, 9.0, error="transport: ConnectError"),
         attempt("w6", 2, 201, 9.5), write("w6", "m6")], kill_slack_s=2.0)
    assert not late.ok


def test_check_all_runs_every_checker_in_order() -> None:
    names = [r.checker for r in check_all([], window_s=0.5, kill_slack_s=2.0)]
    assert names == ["no_lost_writes", "bounded_staleness", "supersession_acyclic",
                     "one_active_head", "no_duplicate_rows", "provenance_intact",
                     "failures_accounted"]
    assert all(r.ok and r.checked == 0 for r in check_all([], 0.5, 2.0))


@pytest.mark.parametrize("fault_ts", [at(5.0)])
def test_a_kill_without_restart_covers_the_rest_of_the_run(fault_ts: str) -> None:
    history = [ev("fault", fault_id="k001", fault_kind="kill", ts=fault_ts),
               attempt("w1", 1, None, 50.0, error="transport: ConnectError"),
               write("w1", None)]
    assert checkers.failures_accounted(history).ok


def test_provenance_intact() -> None:
    history = [write("w0", "m0"), write("w1", "m1", parent_id="m0"),
               write("w2", "m2", parent_id="m1"),
               ev("audit", memory_id="m0", parent_id=None),
               ev("audit", memory_id="m1", parent_id="m0"),
               ev("audit", memory_id="m2", parent_id="m1")]
    result = checkers.provenance_intact(history)
    assert result.ok and result.checked == 2
    relinked = [*history[:4], ev("audit", memory_id="m1", parent_id="m9"), history[5]]
    assert checkers.provenance_intact(relinked).violations == [
        "write w1 (m1) names parent m9, not m0"]
    orphaned = [*history[1:3], *history[4:]]  # the root row is gone
    assert checkers.provenance_intact(orphaned).violations == [
        "write w1: parent m0 is not stored"]
