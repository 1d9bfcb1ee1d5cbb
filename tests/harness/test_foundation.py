"""Harness pieces that need no server: pacing arithmetic, trace contract, seeding, params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetprobe.client import Credential, Result, RetryPolicy, short_error
from fleetprobe.client.pacing import Pacer
from fleetprobe.drive.run import get_experiment
from fleetprobe.experiments.provenance import ProvenanceParams, grade_chain, make_plan
from fleetprobe.harness.experiment import ParamsError, apply_override, parse_params
from fleetprobe.harness.targets import TargetError, TargetParams, live_target
from fleetprobe.harness.trace import SecretLeakError, Trace, phase_fields


def result(status: int | None) -> Result:
    return Result("GET /api/v1/x", status, None, 1.0, 1, None)


# -- client pieces ---------------------------------------------------------------------


@pytest.mark.parametrize(("status", "retried"), [
    (None, True), (500, True), (503, True), (429, True),
    (400, False), (401, False), (403, False), (404, False), (409, False), (422, False),
])
def test_retry_only_on_transport_5xx_429(status: int | None, retried: bool) -> None:
    assert RetryPolicy().should_retry(result(status)) is retried


def test_no_retry_on_429_when_disabled() -> None:
    assert RetryPolicy(retry_on_429=False).should_retry(result(429)) is False
    assert RetryPolicy(retry_on_429=False).should_retry(result(503)) is True


def test_credential_repr_hides_the_key() -> None:
    cred = Credential("tenant", "t1", key="mc_topsecret")
    assert "mc_topsecret" not in repr(cred)
    assert cred.headers() == {"X-API-Key": "mc_topsecret"}
    assert Credential("headers", "t1", agent_id="a1").headers() == {
        "X-Tenant-ID": "t1", "X-Agent-ID": "a1"}


def test_short_error_prefers_envelope_message() -> None:
    body = {"detail": "x", "error": {"code": "CONFLICT", "message": "Duplicate memory exists: 1"}}
    assert short_error(409, body) == "409 Duplicate memory exists: 1"
    assert short_error(504, {"detail": "request timeout"}) == "504 request timeout"


def test_pacer_spaces_reservations_at_the_rate() -> None:
    pacer = Pacer(8.0)
    waits = [pacer.reserve(now=100.0) for _ in range(5)]
    assert waits == pytest.approx([0.0, 0.125, 0.25, 0.375, 0.5])
    # after idling, the next request goes at once (no debt carried over)
    assert pacer.reserve(now=200.0) == 0.0


def test_pacer_burst_and_unthrottled() -> None:
    pacer = Pacer(2.0, burst=3)
    assert [pacer.reserve(now=0.0) for _ in range(4)] == pytest.approx([0, 0, 0, 0.5])
    assert Pacer(None).reserve(now=0.0) == 0.0
    with pytest.raises(ValueError):
        Pacer(0)


# -- trace contract ----------------------------------------------------------------------


def test_events_md_provenance_fields_are_parsed_exactly() -> None:
    prov = phase_fields()["provenance"]
    assert prov["write"] == ("chain_id", "hop", "step", "writer_expected", "memory_id",
                             "parent_id", "pacing")
    assert prov["chain"][-1] == "writes_admitted"
    assert phase_fields()["leakage"]["reprobe"] == phase_fields()["leakage"]["agent_probe"]


def new_trace(root: Path, secrets: frozenset[str] = frozenset()) -> Trace:
    return Trace(root, "provenance", 3, "abcd1234", {"seed": 3}, secrets=secrets)


def test_event_has_common_fields_and_nulls_for_absent(tmp_path: Path) -> None:
    trace = new_trace(tmp_path)
    trace.event("write", Result("POST /api/v1/memories", 201, {}, 2.5, 1, None),
                chain_id="chain-000", hop=0)
    trace.event("chain", chain_id="chain-000", complete=True)
    first, second = (json.loads(x) for x in trace.events_path.read_text().splitlines())
    assert first["run_id"] == trace.run_id == trace.dir.name
    assert (first["seq"], second["seq"]) == (0, 1)
    assert first["ts"].endswith("Z") and "." in first["ts"]
    assert first["op"] == "POST /api/v1/memories" and first["status"] == 201
    assert first["memory_id"] is None and first["pacing"] is None
    assert second["op"] is None and second["status"] is None and second["attempts"] == 0
    assert trace.dir.name.endswith("-provenance-seed3")


def test_event_rejects_fields_and_phases_not_in_events_md(tmp_path: Path) -> None:
    trace = new_trace(tmp_path)
    with pytest.raises(ValueError, match="not in EVENTS.md"):
        trace.event("write", chain_id="c", invented=1)
    with pytest.raises(ValueError, match="not in EVENTS.md"):
        trace.event("probe")


def test_secret_guard_refuses_to_write_a_key(tmp_path: Path) -> None:
    trace = new_trace(tmp_path, secrets=frozenset({"mc_abc123secret"}))
    with pytest.raises(SecretLeakError) as err:
        trace.event("write", chain_id="leak mc_abc123secret here")
    assert "mc_abc123secret" not in str(err.value)
    assert trace.events_path.read_text() == ""
    trace.finish(complete=False, reason="failed with key mc_abc123secret")
    manifest = json.loads(trace.manifest_path.read_text())
    assert manifest["incomplete_reason"] == "failed with key <redacted>"


def test_manifest_starts_incomplete_and_ends_complete(tmp_path: Path) -> None:
    trace = new_trace(tmp_path)
    start = json.loads(trace.manifest_path.read_text())
    assert start["complete"] is False and start["incomplete_reason"] == "running"
    assert start["nonce"] == "abcd1234" and start["seed"] == 3
    assert start["packages"]["httpx"] and start["ended_at"] is None
    trace.event("chain", chain_id="c")
    trace.finish(complete=True)
    end = json.loads(trace.manifest_path.read_text())
    assert end["complete"] is True and end["incomplete_reason"] is None
    assert end["executed"] == {"chain": 1} and end["ended_at"]


# -- seeding and params ------------------------------------------------------------------


def test_same_seed_same_plan_different_seed_different_writers() -> None:
    params = ProvenanceParams(experiment="provenance", seed=11)
    assert make_plan(params) == make_plan(params.model_copy())
    other = make_plan(params.model_copy(update={"seed": 12}))
    writers = [s.writer for c in make_plan(params).chains for s in c.steps]
    assert writers != [s.writer for c in other.chains for s in c.steps]


def test_paper_plan_shape() -> None:
    plan = make_plan(ProvenanceParams(experiment="provenance"))
    assert len(plan.chains) == 50 and all(len(c.steps) == 4 for c in plan.chains)
    assert len({c.topic for c in plan.chains}) == 25
    assert [s.step for s in plan.chains[0].steps] == [
        "observation", "hypothesis", "mitigation", "verification"]
    assert {s.writer for c in plan.chains for s in c.steps} <= set(plan.fleet.agents)


def test_params_errors_name_the_key() -> None:
    exp = get_experiment("provenance")
    with pytest.raises(ParamsError, match="chainz"):
        parse_params(exp, {"chainz": 3})
    with pytest.raises(ParamsError, match="client.max_attempts"):
        parse_params(exp, {"client": {"max_attempts": 0}})
    with pytest.raises(ParamsError, match="unknown experiment"):
        get_experiment("nonesuch")


def test_overrides_parse_yaml_values() -> None:
    params: dict = {"client": {}}
    apply_override(params, "pace_writes_per_s=null")
    apply_override(params, "client.max_attempts=2")
    apply_override(params, "target.profile=naive")
    assert params == {"pace_writes_per_s": None, "client": {"max_attempts": 2},
                      "target": {"profile": "naive"}}
    with pytest.raises(ParamsError, match="key=value"):
        apply_override(params, "seed")


def test_live_target_names_missing_variables() -> None:
    with pytest.raises(TargetError, match="MEMCLAW_API_KEY") as err:
        live_target(TargetParams(kind="live"), env={"MEMCLAW_API_URL": "http://x",
                                                    "MEMCLAW_TENANT_ID": "t"})
    assert "MEMCLAW_API_URL" not in str(err.value)
    headers = live_target(TargetParams(kind="live", auth="headers"),
                          env={"MEMCLAW_API_URL": "http://x/", "MEMCLAW_TENANT_ID": "t"})
    assert headers.base_url == "http://x" and headers.tenant.kind == "headers"


# -- provenance checker on hand-built events ---------------------------------------------


def walk_event(mid: str, parent: str | None, writer: str = "w", status: int = 200) -> dict:
    return {"memory_id": mid, "parent_observed": parent, "status": status,
            "writer_expected": "w", "writer_observed": writer}


ADMITTED = {m: {} for m in ("a", "b", "c", "d")}


def test_grade_complete_chain() -> None:
    walk = [walk_event("d", "c"), walk_event("c", "b"), walk_event("b", "a"),
            walk_event("a", None)]
    graded = grade_chain("c1", 4, ADMITTED, walk)
    assert graded["complete"] and graded["accurate"] and graded["depth_faithful"]
    assert graded["depth_observed"] == 4


def test_grade_broken_walk_and_wrong_writer() -> None:
    walk = [walk_event("d", "c"), walk_event("c", "b", writer="x"),
            walk_event("b", "a", status=404)]
    graded = grade_chain("c1", 4, ADMITTED, walk)
    assert not graded["complete"] and not graded["accurate"] and not graded["depth_faithful"]
    assert graded["depth_observed"] == 2


def test_grade_lost_chain() -> None:
    lost = grade_chain("c1", 4, {"a": {}}, [walk_event("a", None)])
    assert not lost["complete"] and lost["accurate"] and lost["depth_observed"] == 1
    assert lost["writes_admitted"] == 1
    nothing = grade_chain("c2", 4, {}, [])
    assert not nothing["complete"] and not nothing["accurate"]
