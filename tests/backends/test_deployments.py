"""On the wire, through each adapter: the adapter bugs of issue 23 stay fixed (a caller's
metadata never moves a row's scope; fleet ids with `.` or `/` are one fleet, never a 500 or a
nested one; an empty fleet id is a 4xx in MemClaw's envelope), the native PATCH, DELETE and
listing answer, and the deployments differ as docs/backends.md says. LangGraph's production
stores (SqliteStore on sqlean, PostgresStore on the embedded PostgreSQL) serve the same."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fleetprobe.backends import BACKENDS
from fleetprobe.backends.process import BackendServer

pytestmark = pytest.mark.backends


class Wire:
    """A fresh tenant on a running adapter, its tenant key and agent keys."""

    def __init__(self, server: BackendServer) -> None:
        self.url = server.base_url + "/api/v1"
        self.tenant_id, key = server.create_tenant()
        self.tenant = {"X-API-Key": key}

    def agent(self, agent_id: str, fleet: str) -> dict[str, str]:
        r = httpx.post(self.url + "/admin/agent-keys/provision", headers=self.tenant,
                       timeout=30, json={"tenant_id": self.tenant_id, "agent_id": agent_id,
                                         "initial_fleet": fleet, "initial_trust": 1})
        assert r.status_code == 201, r.text
        return {"X-API-Key": r.json()["raw_key"]}

    def write(self, headers: dict[str, str], **body: Any) -> httpx.Response:
        return httpx.post(self.url + "/memories", headers=headers, timeout=60,
                          json={"tenant_id": self.tenant_id, **body})

    def search(self, headers: dict[str, str], query: str, **body: Any) -> list[str]:
        r = httpx.post(self.url + "/search", headers=headers, timeout=60,
                       json={"tenant_id": self.tenant_id, "query": query, "top_k": 10, **body})
        assert r.status_code == 200, r.text
        return [item["id"] for item in r.json()["items"]]

    def get(self, headers: dict[str, str], memory_id: str) -> httpx.Response:
        return httpx.get(self.url + f"/memories/{memory_id}", headers=headers, timeout=60,
                         params={"tenant_id": self.tenant_id})


@pytest.mark.parametrize("backend", BACKENDS)
def test_adapter_bugs_stay_fixed(backend: str,
                                 backend_server: Callable[..., BackendServer]) -> None:
    w = Wire(backend_server(backend))
    text = "Heron ledger closes on the ninth"
    written = w.write(w.tenant, content=text, agent_id="a", fleet_id="f1",
                      visibility="scope_team",
                      metadata={"fleet_id": "f2", "visibility": "scope_org", "k": "v"})
    assert written.status_code == 201, written.text
    got = w.get(w.tenant, written.json()["id"]).json()
    assert (got["fleet_id"], got["visibility"]) == ("f1", "scope_team")  # as the 201 said
    assert got["metadata"] == {"fleet_id": "f2", "visibility": "scope_org", "k": "v"}
    assert written.json()["id"] not in w.search(w.tenant, text, fleet_ids=["f2"])
    for odd in ("f.1", "f1/x"):  # one fleet each: no 500, no nesting under f1
        row = w.write(w.tenant, content=f"Odd fleet {odd} note", agent_id="a", fleet_id=odd)
        assert row.status_code == 201, row.text
        assert w.get(w.tenant, row.json()["id"]).json()["fleet_id"] == odd
        assert row.json()["id"] in w.search(w.tenant, f"Odd fleet {odd} note",
                                            fleet_ids=[odd])
        # in f1's search only where the backend matches scopes as strings: CrewAI's
        # `LIKE 'f1%'` (#7543) matches any id that starts with "f1", escaped or not
        in_f1 = row.json()["id"] in w.search(w.tenant, f"Odd fleet {odd} note",
                                             fleet_ids=["f1"])
        assert in_f1 is (backend == "crewai" and odd.startswith("f1"))
    bad = w.write(w.tenant, content="x", agent_id="a", fleet_id="")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_ARGUMENTS"


NO_UPDATE = ("graphiti",)  # backends with no update of a stored memory (PATCH answers 501)


@pytest.mark.parametrize("backend", BACKENDS)
def test_native_patch_delete_list(backend: str,
                                  backend_server: Callable[..., BackendServer]) -> None:
    w = Wire(backend_server(backend))
    text = "Osprey rota moves to Thursday"
    mid = w.write(w.tenant, content=text, agent_id="a", fleet_id="f1").json()["id"]
    patched = httpx.patch(w.url + f"/memories/{mid}", headers=w.tenant, timeout=60,
                          params={"tenant_id": w.tenant_id},
                          json={"content": "Osprey rota moves to Friday"})
    if backend in NO_UPDATE:
        assert patched.status_code == 501, patched.text
    else:
        assert patched.status_code == 200, patched.text
        assert w.get(w.tenant, mid).json()["content"] == "Osprey rota moves to Friday"
    status = httpx.patch(w.url + f"/memories/{mid}", headers=w.tenant, timeout=60,
                         params={"tenant_id": w.tenant_id}, json={"status": "archived"})
    assert status.status_code == 501  # no status lifecycle on any of the three
    listed = httpx.get(w.url + "/memories", headers=w.tenant, timeout=60,
                       params={"tenant_id": w.tenant_id, "fleet_id": "f1"})
    assert listed.status_code == 200 and mid in [i["id"] for i in listed.json()["items"]]
    gone = httpx.delete(w.url + f"/memories/{mid}", headers=w.tenant, timeout=60,
                        params={"tenant_id": w.tenant_id})
    assert gone.status_code == 204, gone.text
    assert w.get(w.tenant, mid).status_code == 404
    again = httpx.delete(w.url + f"/memories/{mid}", headers=w.tenant, timeout=60,
                         params={"tenant_id": w.tenant_id})
    assert again.status_code == 404 and again.json()["error"]["code"] == "NOT_FOUND"


# A fleet-mate's search of the fleet: does it return another agent's agent-scoped row?
# idiomatic: LangGraph nests agent namespaces in the fleet's, CrewAI crews read every agent
# subscope, mem0 has no visibility; strict: each backend's own mechanism keeps it out.
MATE_SEES_PRIVATE = {("langgraph", "idiomatic"): True, ("langgraph", "strict"): False,
                     ("mem0", "idiomatic"): True, ("mem0", "strict"): False,
                     ("crewai", "idiomatic"): True, ("crewai", "strict"): False}
# Graphiti: the fleet's partition holds agent-scoped rows (idiomatic); strict gives each its own
MATE_SEES_PRIVATE |= {("graphiti", "idiomatic"): True, ("graphiti", "strict"): False}
# Cognee: idiomatic keeps an agent-scoped row in its fleet's dataset (nothing below a dataset);
# strict files it in a dataset granted to its writer alone
MATE_SEES_PRIVATE |= {("cognee", "idiomatic"): True, ("cognee", "strict"): False}
# LangGraph's stores beside InMemoryStore (sqlite: sqlean's SQLite loads sqlite-vec)
# and the second store mem0 and CrewAI each ship (mem0's pgvector on the embedded PostgreSQL,
# CrewAI's Qdrant Edge)
CASES = [(b, d, None) for b in BACKENDS for d in ("idiomatic", "strict")] + [
    ("langgraph", "strict", "sqlite"), ("langgraph", "idiomatic", "postgres"),
    ("mem0", "strict", "pgvector"), ("crewai", "idiomatic", "qdrant-edge")]


@pytest.mark.parametrize(("backend", "deployment", "store"), CASES)
def test_deployments_differ_as_documented(
        backend: str, deployment: str, store: str | None,
        backend_server: Callable[..., BackendServer]) -> None:
    server = backend_server(backend, None if deployment == "idiomatic" else deployment, store)
    version = httpx.get(server.base_url + "/api/v1/version", timeout=30).json()
    assert version["backend_deployment"] == deployment
    assert store is None or store.split("-")[0] in version["backend_store"].lower()
    w = Wire(server)
    owner, mate = w.agent("owner", "f1"), w.agent("mate", "f1")
    text = "Plover vault code rotates at dusk"
    mid = w.write(owner, content=text, visibility="scope_agent").json()["id"]
    assert (mid in w.search(mate, text)) is MATE_SEES_PRIVATE[(backend, deployment)]
    assert mid in w.search(owner, text)  # the writer always finds its own row


# The version sweep: LangGraph's SqliteStore at checkpoint-sqlite 3.1.0 matches a namespace
# prefix across the segment boundary (a search of fleet `f1` returns fleet `f10`'s row: the
# bug issue 23 files as CVE-2026-71433), 3.1.1 does not.
@pytest.mark.parametrize(("env", "leaks"), [("langgraph-ckpt-3.1.0", True),
                                            ("langgraph-ckpt-3.1.1", False)])
def test_checkpoint_version_sweep(env: str, leaks: bool,
                                  backend_server: Callable[..., BackendServer]) -> None:
    server = backend_server("langgraph", None, "sqlite", env)
    version = httpx.get(server.base_url + "/api/v1/version", timeout=30).json()
    assert version["backend_env"]["packages"]["langgraph-checkpoint-sqlite"] == env[-5:]
    w = Wire(server)
    text = "Gannet ferry schedule slips a week"
    mid = w.write(w.tenant, content=text, agent_id="a", fleet_id="f10").json()["id"]
    assert (mid in w.search(w.tenant, text, fleet_ids=["f1"])) is leaks
