"""The reference server demands each credential shape MemClaw deploys (`--auth`):
managed-gateway keys, a self-hosted engine's shared gate key + X-Tenant-ID + asserted
X-Agent-ID, and headers with no key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from reference_server.launch.process import ReferenceServer

from .conftest import FAST_ARGS


@pytest.fixture(scope="module")
def gate_server() -> Iterator[ReferenceServer]:
    with ReferenceServer(profile="memclaw-2026-05-31", extra_args=FAST_ARGS,
                         auth="gate") as server:
        yield server


@pytest.fixture(scope="module")
def headers_server() -> Iterator[ReferenceServer]:
    with ReferenceServer(profile="memclaw-2026-05-31", extra_args=FAST_ARGS,
                         auth="headers") as server:
        yield server


def call(server: ReferenceServer, method: str, path: str, headers: dict[str, str],
         **kw: Any) -> httpx.Response:
    return httpx.request(method, server.base_url + "/api/v1" + path, headers=headers,
                         timeout=10.0, **kw)


def gate_headers(server: ReferenceServer, tenant: str, agent: str | None = None
                 ) -> dict[str, str]:
    hdrs = {"X-API-Key": server.gate_key or "", "X-Tenant-ID": tenant}
    return {**hdrs, "X-Agent-ID": agent} if agent else hdrs


def test_gate_mode_without_the_key_answers_memclaws_401(gate_server: ReferenceServer) -> None:
    r = call(gate_server, "GET", "/memories", {"X-Tenant-ID": "t1"})
    assert r.status_code == 401
    assert r.json()["error"]["message"] == "Missing API key. Include X-API-Key header."
    wrong = call(gate_server, "GET", "/memories", {"X-API-Key": "mc_wrong", "X-Tenant-ID": "t1"})
    assert wrong.status_code == 401 and wrong.json()["error"]["message"] == "Invalid API key."


def test_gate_key_alone_names_no_tenant(gate_server: ReferenceServer) -> None:
    r = call(gate_server, "GET", "/memories", {"X-API-Key": gate_server.gate_key or ""},
             params={"tenant_id": "t1"})
    assert r.status_code == 403
    assert "not authorized to read tenant" in r.json()["error"]["message"]


def test_gate_mode_takes_the_asserted_agent_identity(gate_server: ReferenceServer) -> None:
    tenant = "t-gate-identity"
    hdrs = gate_headers(gate_server, tenant, "a1")
    who = call(gate_server, "GET", "/whoami", hdrs).json()
    assert (who["tenant_id"], who["agent_id"], who["auth_mode"]) == (tenant, "a1", "gate")
    w = call(gate_server, "POST", "/memories", hdrs,
             json={"tenant_id": tenant, "fleet_id": "fa", "content": "gate mode asserted write"})
    assert w.status_code == 201 and w.json()["agent_id"] == "a1"
    # a body agent_id other than the asserted identity is refused
    other = call(gate_server, "POST", "/memories", hdrs,
                 json={"tenant_id": tenant, "agent_id": "b1", "content": "not as b1 please"})
    assert other.status_code == 403
    # the asserted identity governs by-id reads: a trust-1 agent of another fleet gets 404
    call(gate_server, "POST", "/memories", gate_headers(gate_server, tenant, "b1"),
         json={"tenant_id": tenant, "fleet_id": "fb", "content": "registers agent b1 in fb"})
    get = call(gate_server, "GET", f"/memories/{w.json()['id']}",
               gate_headers(gate_server, tenant, "b1"), params={"tenant_id": tenant})
    assert get.status_code == 404
    # the tenant credential (no X-Agent-ID) reads it
    tenant_get = call(gate_server, "GET", f"/memories/{w.json()['id']}",
                      gate_headers(gate_server, tenant), params={"tenant_id": tenant})
    assert tenant_get.status_code == 200


def test_gate_mode_trust_is_set_by_the_tenant_credential_only(
        gate_server: ReferenceServer) -> None:
    tenant = "t-gate-trust"
    call(gate_server, "POST", "/memories", gate_headers(gate_server, tenant, "a2"),
         json={"tenant_id": tenant, "fleet_id": "fa", "content": "registers agent a2 here"})
    as_agent = call(gate_server, "PATCH", "/agents/a2/trust",
                    gate_headers(gate_server, tenant, "a2"), params={"tenant_id": tenant},
                    json={"trust_level": 3})
    assert as_agent.status_code == 403
    ok = call(gate_server, "PATCH", "/agents/a2/trust", gate_headers(gate_server, tenant),
              params={"tenant_id": tenant}, json={"trust_level": 2})
    assert ok.status_code == 200 and ok.json()["trust_level"] == 2


def test_a_self_hosted_engine_has_no_agent_key_provisioning(gate_server: ReferenceServer,
                                                           headers_server: ReferenceServer
                                                           ) -> None:
    body = {"agent_id": "a3", "initial_trust": 1}
    r = call(gate_server, "POST", "/admin/agent-keys/provision",
             gate_headers(gate_server, "t-prov"), json=body)
    assert r.status_code == 404
    h = call(headers_server, "POST", "/admin/agent-keys/provision", {"X-Tenant-ID": "t-prov"},
             json=body)
    assert h.status_code == 404


def test_headers_mode_needs_a_tenant_header_and_no_key(headers_server: ReferenceServer) -> None:
    r = call(headers_server, "GET", "/memories", {})
    assert r.status_code == 401
    assert r.json()["error"]["message"] == "Missing API key or X-Tenant-ID header."
    hdrs = {"X-Tenant-ID": "t-headers", "X-Agent-ID": "h1"}
    w = call(headers_server, "POST", "/memories", hdrs,
             json={"tenant_id": "t-headers", "content": "headers mode asserted write"})
    assert w.status_code == 201 and w.json()["agent_id"] == "h1"


def test_the_admin_key_works_in_every_mode(gate_server: ReferenceServer,
                                           headers_server: ReferenceServer) -> None:
    for server in (gate_server, headers_server):
        tenant_id, _ = server.create_tenant()
        assert tenant_id
