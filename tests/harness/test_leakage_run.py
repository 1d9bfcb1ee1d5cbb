"""Leakage end to end against the real reference server, at smoke scale, per profile.

One smoke run per profile (module scope, raised rate limits); each test asserts what the
paper's qualitative result is under that profile, judged from the recorded events. Counts
are derived from the plan (F fleets, K agents), never typed in.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fleetprobe import load_params, run_experiment
from fleetprobe.harness.targets import target_for_server
from reference_server.launch.process import ReferenceServer, free_port

from .traces import KEY_LIKE, REPO, events

SMOKE = REPO / "params/smoke/leakage.yaml"
RAISED_LIMITS = ("--write-rate", "1000/second", "--search-rate", "6000/minute")



def variant(w: str, s: str) -> dict[str, str]:
    return {"variant_write": w, "variant_search": s}


class SmokeRun:
    def __init__(self, run_dir: Path, params: dict[str, Any], secrets: set[str]) -> None:
        self.dir = run_dir
        self.params = params
        self.secrets = secrets
        self.manifest = json.loads((run_dir / "manifest.json").read_text())
        fleets, agents = params["fleets"], params["agents_per_fleet"]
        # ground truth sizes of the F x K matrix
        self.cross_fleet_fleet_probes = fleets * (fleets - 1) * agents
        self.authors = fleets
        self.deny = fleets * agents * 2 * fleets - (fleets * agents + fleets)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SmokeRun]]:
    out: dict[str, SmokeRun] = {}
    for profile in ("memclaw-2026-05-30", "memclaw-2026-05-31", "naive"):
        root = tmp_path_factory.mktemp(profile)
        params = load_params(SMOKE, [f"traces_root={root}", f"target.profile={profile}"])
        with ReferenceServer(profile=profile, extra_args=RAISED_LIMITS) as server:
            target = target_for_server(server, profile)
            run_dir = run_experiment("leakage", params, target=target)
        out[profile] = SmokeRun(run_dir, params, set(target.secrets))
    yield out


def test_runs_complete_with_every_planned_event(runs: dict[str, SmokeRun]) -> None:
    for profile, run in runs.items():
        m = run.manifest
        assert m["complete"] is True, (profile, m["incomplete_reason"])
        assert m["planned"] == m["executed"], profile
        assert m["skipped"] == []
        assert m["target"]["server_profile"] == profile
        assert {e["status"] for e in events(run.dir, "write")} == {201}


def test_no_key_reaches_the_trace(runs: dict[str, SmokeRun]) -> None:
    for run in runs.values():
        for path in run.dir.iterdir():
            text = path.read_text()
            assert not any(s in text for s in run.secrets), path
            assert not KEY_LIKE.search(text), path  # agent keys included


def test_0530_trust1_cross_fleet_get_returns_the_row(runs: dict[str, SmokeRun]) -> None:
    run = runs["memclaw-2026-05-30"]
    table3 = events(run.dir, "agent_probe")
    assert [e["status"] for e in table3] == [200, 200, 200, 200]
    (t1_cross,) = [e for e in table3 if e["trust"] == 1 and e["relation"] == "cross_fleet"]
    assert t1_cross["returned"] is True and t1_cross["leak"] is True
    assert all(e["returned"] for e in table3)


def test_whoami_confirms_each_agent_identity(runs: dict[str, SmokeRun]) -> None:
    run = runs["memclaw-2026-05-30"]
    whoami = events(run.dir, "whoami")
    (tenant,) = [e for e in whoami if e["credential"] == "tenant"]
    assert tenant["status"] == 200 and tenant["whoami_agent_id"] is None
    agents = [e for e in whoami if e["credential"] == "agent"]
    assert agents and all(e["whoami_agent_id"] == e["prober_agent"] for e in agents)
    assert all(e["provisioned"] for e in events(run.dir, "provision"))


def test_0530_tenant_key_get_exposure_is_total(runs: dict[str, SmokeRun]) -> None:
    run = runs["memclaw-2026-05-30"]
    gets = events(run.dir, "probe", axis="get")
    assert gets and all(e["status"] == 200 and e["returned"] for e in gets)
    for pair in run.params["variants"]:
        deny = events(run.dir, "probe", axis="get", expected="deny", **variant(*pair))
        assert len(deny) == run.deny and all(e["leak"] for e in deny)


def test_0530_default_search_holds_scope_and_misses_only_own_agent_secrets(
    runs: dict[str, SmokeRun],
) -> None:
    run = runs["memclaw-2026-05-30"]
    search = events(run.dir, "probe", axis="search", **variant("fleet_id", "fleet_ids"))
    assert not [e for e in search if e["leak"]]
    misses = [e for e in search if e["miss"]]
    assert len(misses) == run.authors
    assert all(e["secret_scope"] == "agent" and e["relation"] == "same_agent" for e in misses)


@pytest.mark.parametrize("switch", [("no_fleet", "fleet_ids"), ("fleet_id", "fleet_id_singular")])
def test_0530_each_hypothesis_switch_leaks_every_cross_fleet_fleet_secret(
    runs: dict[str, SmokeRun], switch: tuple[str, str]
) -> None:
    run = runs["memclaw-2026-05-30"]
    search = events(run.dir, "probe", axis="search", **variant(*switch))
    leaks = [e for e in search if e["leak"]]
    assert len(leaks) == run.cross_fleet_fleet_probes
    assert all(e["secret_scope"] == "fleet" and e["relation"] == "cross_fleet" for e in leaks)
    assert len([e for e in search if e["miss"]]) == run.authors


def test_no_fleet_variant_stores_a_null_fleet_id(runs: dict[str, SmokeRun]) -> None:
    writes = events(runs["memclaw-2026-05-30"].dir, "write")
    no_fleet = [w for w in writes if w["variant_write"] == "no_fleet"]
    with_fleet = [w for w in writes if w["variant_write"] == "fleet_id"]
    assert no_fleet and all(w["stored_fleet_id"] is None for w in no_fleet)
    assert all(w["stored_fleet_id"] == w["writer_fleet"] for w in with_fleet)


def test_0531_reprobe_denies_trust1_cross_fleet_and_admits_trust2(
    runs: dict[str, SmokeRun],
) -> None:
    run = runs["memclaw-2026-05-31"]
    reprobe = events(run.dir, "reprobe")
    t1_cross = [e for e in reprobe if e["trust"] == 1 and e["relation"] == "cross_fleet"]
    t2_cross = [e for e in reprobe if e["trust"] == 2 and e["relation"] == "cross_fleet"]
    same = [e for e in reprobe if e["relation"] == "same_fleet"]
    assert t1_cross and not any(e["returned"] for e in t1_cross)
    assert {e["status"] for e in t1_cross} == {404}
    assert t2_cross and all(e["returned"] for e in t2_cross)
    assert same and all(e["returned"] for e in same)
    assert not any(e["leak"] for e in reprobe) and not any(e["miss"] for e in reprobe)
    (t1_table3,) = [e for e in events(run.dir, "agent_probe")
                    if e["trust"] == 1 and e["relation"] == "cross_fleet"]
    assert t1_table3["status"] == 404 and t1_table3["leak"] is False


def test_0530_reprobe_shows_the_gap_the_remediation_closed(runs: dict[str, SmokeRun]) -> None:
    reprobe = events(runs["memclaw-2026-05-30"].dir, "reprobe")
    t1_cross = [e for e in reprobe if e["trust"] == 1 and e["relation"] == "cross_fleet"]
    assert t1_cross and all(e["leak"] for e in t1_cross)


def test_naive_search_leaks_with_the_default_variant(runs: dict[str, SmokeRun]) -> None:
    run = runs["naive"]
    search = events(run.dir, "probe", axis="search", **variant("fleet_id", "fleet_ids"))
    leaks = [e for e in search if e["leak"]]
    assert leaks
    # an ungoverned store shows agent secrets to peers too, which no MemClaw profile does
    assert any(e["secret_scope"] == "agent" for e in leaks)


class GatewaylessProxy:
    """A loopback MemClaw without the managed gateway: forwards every request to a reference
    server except agent-key provisioning, which answers 404 as open-source core-api does
    (WIRE.md 1.7). Real HTTP on both sides."""

    def __init__(self, upstream: str) -> None:
        async def forward(request: Request) -> Response:
            if request.url.path.endswith("/admin/agent-keys/provision"):
                return JSONResponse({"detail": "Not Found",
                                     "error": {"code": "NOT_FOUND", "message": "Not Found"}},
                                    status_code=404)
            async with httpx.AsyncClient(base_url=upstream) as client:
                answer = await client.request(
                    request.method, request.url.path, params=request.query_params,
                    content=await request.body(),
                    headers={k: v for k, v in request.headers.items() if k != "host"})
            return Response(answer.content, answer.status_code,
                            media_type=answer.headers.get("content-type"))

        app = Starlette(routes=[Route("/{path:path}", forward,
                                      methods=["GET", "POST", "PATCH", "DELETE"])])
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))

    def __enter__(self) -> str:
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started, "proxy did not start"
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def test_target_without_provisioning_skips_agent_probes_with_a_reason(
    tmp_path: Path,
) -> None:
    params = load_params(SMOKE, [f"traces_root={tmp_path}", "variants=[[fleet_id, fleet_ids]]"])
    with ReferenceServer(extra_args=RAISED_LIMITS) as server, \
            GatewaylessProxy(server.base_url) as proxy_url:
        target = target_for_server(server, "memclaw-2026-05-30")
        target.base_url = proxy_url
        run_dir = run_experiment("leakage", params, target=target)
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["complete"] is True
    assert any("no agent-key provisioning endpoint" in s["reason"] for s in m["skipped"])
    (provision,) = events(run_dir, "provision")
    assert provision["status"] == 404 and provision["provisioned"] is False
    assert events(run_dir, "reprobe") == []
    # the tenant-key row of Table 3 needs no agent key, so it still runs
    assert [e["credential"] for e in events(run_dir, "agent_probe")] == ["tenant"]
    assert m["executed"]["probe"] == m["planned"]["probe"]
    assert m["executed"].get("reprobe", 0) < m["planned"]["reprobe"]
