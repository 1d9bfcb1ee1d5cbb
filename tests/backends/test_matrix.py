"""The governance matrix against a backend adapter: the world is built from what the backend
supports, every probe of a path (or of a world-building step) it lacks is not applicable with
the backend's reason, and the judged cells say what the backend's scoping does (docs/backends.md).

A trimmed smoke (two tenants, the prefix pair fleet-1 / fleet-10, trust 1 only, no sweeps, a
few random probes) keeps `make backends-smoke` short; `params/backends.yaml` runs the full one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetprobe.backends.process import BackendServer
from fleetprobe.harness.experiment import load_params
from fleetprobe.world.target import NA_GHOST

from .conftest import ROOT, run_on

pytestmark = pytest.mark.backends

SMOKE = ["target.kind=backend", "fleets=2", "enumerate_trusts=[1]", "sweeps=false",
         "random_probes=150", "settle_s=0"]
# Paths none of the three backends has an equivalent for, or whose world the matrix cannot
# build on them (no entity graph, no bulk attempt ids): never judged. Listing, PATCH and
# DELETE are the backends' own since issue 23, so they are judged.
NEVER_JUDGED = {"contradictions", "patch_status", "redistribute",
                "redistribute_x", "bulk_write", "bulk_attempt", "entity_upsert", "entity",
                "agent_read", "recall"}
# (who, path, owner of the row, visibility) -> verdict, per backend. A t1 agent of fleet-1:
# - search in its own fleet for a fleet-mate's private row (idiomatic deployments): LangGraph's
#   namespace prefix, mem0's missing visibility concept and CrewAI's crew-level recall (which
#   reads every agent subscope) return it;
# - GET by id of a team row of fleet-10: LangGraph reads only under the caller's prefix; mem0's
#   get(id) and CrewAI's get_record(id) take no identity;
# - search naming no fleet (its home, fleet-1) for a team row of fleet-10: CrewAI's string
#   prefix match on scope paths returns it (crewAIInc/crewAI#7543); the others do not.
CELLS = {
    ("A.f0t1", "search_fleet", "A.f0t2", "scope_agent"):
        {"langgraph": "gap", "mem0": "gap", "crewai": "gap"},
    ("A.f0t1", "get", "A.f1t1", "scope_team"):
        {"langgraph": "ok", "mem0": "gap", "crewai": "gap"},
    ("A.f0t1", "search", "A.f1t1", "scope_team"):
        {"langgraph": "ok", "mem0": "ok", "crewai": "gap"},
}
# which backends the smoke measures (each adds an adapter start-up to `make backends-smoke`)
MATRIX_SMOKE_BACKENDS = ("langgraph", "crewai")


def _events(run_dir: Path) -> list[dict[str, Any]]:
    with (run_dir / "events.jsonl").open() as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.parametrize("backend", MATRIX_SMOKE_BACKENDS)
def test_matrix_smoke(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      backend_server: Callable[[str], BackendServer]) -> None:
    server = backend_server(backend)
    params = load_params(ROOT / "params/smoke/matrix.yaml", [
        *SMOKE, f"target.backend={backend}", f"traces_root={tmp_path}"])
    started = time.monotonic()
    run_dir = run_on(server, "matrix", params, monkeypatch)
    elapsed = time.monotonic() - started
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["complete"] is True, manifest["incomplete_reason"]
    assert manifest["executed"]["verdict"] == manifest["planned"]["verdict"]
    assert manifest["target"]["backend"] == backend
    assert manifest["target"]["outbound_refused"] == 0
    events = _events(run_dir)
    probes = {e["probe_id"]: e for e in events if e["phase"] == "probe"}
    verdicts = {e["probe_id"]: e for e in events if e["phase"] == "verdict"}
    assert probes.keys() == verdicts.keys()

    # not applicable: always with the backend's reason, never judged, never an error
    for pid, v in verdicts.items():
        p = probes[pid]
        if v["verdict"] == "n/a":
            assert v["what"] and p["not_applicable"] == v["what"], (pid, v, p)
            # the backend's reason, or an agent id nobody registered (no key to speak with)
            assert v["what"] == NA_GHOST or (
                "not supported by this backend" in v["what"] and backend in v["what"])
            assert p["returned"] is None
        else:
            assert p["not_applicable"] is None, (pid, v, p)
        if v["path"] in NEVER_JUDGED:
            assert v["verdict"] == "n/a", (pid, v["path"], v["verdict"])
    # no errors: a row the backend's own DELETE removed for good is judged as the census read
    # it just before the delete (returning it afterwards would be a gap), never left unjudged
    assert not [(v["path"], v["what"]) for v in verdicts.values() if v["verdict"] == "error"]
    # and the backend does answer the paths it has: reads, searches, writes are judged
    judged = {v["path"] for v in verdicts.values() if v["verdict"] != "n/a"}
    assert {"get", "search", "search_fleet", "search_fleets", "write", "list", "patch",
            "delete"} <= judged
    # a gap is a recorded return of what the policy denies, and nothing else
    for pid, v in verdicts.items():
        if v["verdict"] == "gap":
            assert probes[pid]["returned"] is True and v["expected"] == "deny"

    # the known cells, found through the recorded census (owner and visibility of the row)
    rows = {e["row_key"]: e for e in events if e["phase"] == "census_row"}
    assert rows and all(e["source"] in ("get", "get before delete") for e in rows.values())
    gone = [e for e in rows.values() if e["source"] == "get before delete"]
    assert gone and all(e["deleted"] for e in gone)
    assert {verdicts[pid]["verdict"] for pid, p in probes.items()
            if p["row_key"] in {e["row_key"] for e in gone}} - {"n/a"}  # judged
    for (who, path, owner, visibility), expected in CELLS.items():
        found = [verdicts[pid] for pid, p in probes.items()
                 if p["who"] == who and p["path"] == path and pid.startswith("e")
                 and rows.get(p["row_key"], {}).get("owner") == owner
                 and rows[p["row_key"]]["visibility"] == visibility]
        assert len(found) == 1, (who, path, owner, visibility, found)
        assert found[0]["verdict"] == expected[backend], (backend, who, path, owner, found)
    print(f"{backend} matrix smoke: {elapsed:.1f} s, {len(verdicts)} probes, "
          f"{sum(v['verdict'] == 'n/a' for v in verdicts.values())} not applicable")
    assert elapsed < 180  # a loaded CI machine gets slack, a hang does not
