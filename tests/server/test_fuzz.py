"""Generated wire inputs (schemathesis over the server's own `/api/openapi.json`) against the
real reference server on loopback: no 5xx ever, every 4xx in MemClaw's error envelope with the
code WIRE.md 2.0 gives its status, every success valid against the server's OpenAPI (and
MemClaw's frozen broker contract where it names the body), and no rejected write leaves a
trace in the store.

Bounded and repeatable: a fixed number of examples per operation and mode from a fixed seed, no
shrinking (a failure reports the example as generated), no deadline."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import response_schema_conformance

from reference_server.launch.process import ReferenceServer

from .test_wire_conformance import BROKER, check

PROFILE = "memclaw-2026-05-31"
# Rate limits out of the way; a detection delay no test outlives, so the background detector
# never changes rows between the before and after snapshots of a write.
SERVER_ARGS = ("--write-rate", "10000/second", "--search-rate", "10000/second",
               "--bulk-rate", "10000/second", "--detection-delay", "3600")
# A fixed seed keeps CI repeatable; set FLEETPROBE_FUZZ_SEED to explore other inputs.
SEED = int(os.environ.get("FLEETPROBE_FUZZ_SEED", "20260530"))
# Examples per operation: `make test` draws a quick budget, `make test-slow` the full one.
EXAMPLES = {"quick": {GenerationMode.POSITIVE: 10, GenerationMode.NEGATIVE: 6},
            "full": {GenerationMode.POSITIVE: 30, GenerationMode.NEGATIVE: 20}}
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)

OPERATIONS = [
    ("POST", "/api/v1/memories"),
    ("POST", "/api/v1/search"),
    ("GET", "/api/v1/memories/{memory_id}"),
    ("GET", "/api/v1/memories"),
    ("POST", "/api/v1/memories/bulk"),
    ("PATCH", "/api/v1/memories/{memory_id}/status"),
    ("POST", "/api/v1/entities/upsert"),
    ("POST", "/api/v1/memories/redistribute"),
    ("PATCH", "/api/v1/memories/{memory_id}"),
    ("DELETE", "/api/v1/memories/{memory_id}"),
    ("GET", "/api/v1/memories/{memory_id}/contradictions"),
    ("POST", "/api/v1/recall"),
]
WRITES = {"POST /api/v1/memories", "POST /api/v1/memories/bulk",
          "PATCH /api/v1/memories/{memory_id}/status", "POST /api/v1/entities/upsert",
          "POST /api/v1/memories/redistribute", "PATCH /api/v1/memories/{memory_id}",
          "DELETE /api/v1/memories/{memory_id}"}
# Success bodies MemClaw's broker contract names (beyond what the broker maps by path).
BROKER_BODIES = {("POST /api/v1/memories", 201): "MemoryOut"}
# Keys WIRE.md gives the success bodies the broker contract leaves out (sections 2.4, 2.6, 2.9,
# 2.10; recall: reference_server/README.md, as MemClaw's summary object is unspecified).
WIRE_BODY_KEYS = {
    "GET /api/v1/memories/{memory_id}/contradictions": {
        "memory_id", "status", "superseded_by", "superseded_memories", "detection_status",
        "contradictions"},
    "PATCH /api/v1/memories/{memory_id}/status": {"memory_id", "old_status", "new_status"},
    "POST /api/v1/memories/redistribute": {"moved", "promoted", "skipped", "errors",
                                           "redistribute_ms"},
    "POST /api/v1/entities/upsert": {"id", "tenant_id", "fleet_id", "entity_type",
                                     "canonical_name", "attributes", "linked_memories",
                                     "relations"},
    "POST /api/v1/recall": {"summary", "summarizer", "memory_count", "memories"},
}

ATTEMPT_IDS = st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True)
# MemClaw registers an unknown writer before its write pipeline runs (WIRE.md 2.1, order of
# checks: resolve_write_agent comes before the pipeline's length and duplicate gates), so a
# write the pipeline rejects still leaves the agent row: by design, not a partial write.
SIDE_EFFECT_TABLES = {"agents"}
# WIRE.md 2.6: the statuses a memory can be set to.
STATUSES = ("active", "pending", "confirmed", "cancelled", "outdated", "conflicted", "archived",
            "deleted")
# WIRE.md 2.0, written out here rather than imported from the server: the oracle must not be
# the code under test.
WIRE_4XX_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 402: "PAYMENT_REQUIRED",
                  403: "FORBIDDEN", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED",
                  408: "REQUEST_TIMEOUT", 409: "CONFLICT", 410: "GONE",
                  413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE",
                  422: "INVALID_ARGUMENTS", 429: "RATE_LIMITED"}

# Who calls: mostly the tenant's own key (so requests get past auth), sometimes a trusted agent
# key of that tenant, and sometimes a credential that must never succeed.
OWN = ("tenant", "agent")
CREDENTIALS = st.sampled_from(["tenant"] * 5 + ["agent"] * 2
                              + ["foreign_tenant", "wrong_key", "no_key"])
# Most positive cases get what MemClaw needs beyond the schema; the rest go in as generated.
REACH_HANDLER = st.sampled_from([True, True, True, False])


@dataclass
class Target:
    server: ReferenceServer
    schema: Any
    session: requests.Session
    tenant_id: str
    tenant_key: str
    foreign_tenant_id: str
    agent_id: str
    agent_key: str

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def credential(self, kind: str) -> tuple[dict[str, str], str]:
        """(headers, tenant_id to put in the request) for one kind of caller."""
        headers = {"tenant": {"X-API-Key": self.tenant_key},
                   "agent": {"X-API-Key": self.agent_key},
                   "foreign_tenant": {"X-API-Key": self.tenant_key},
                   "wrong_key": {"X-API-Key": "mc_" + "0" * 40},
                   "no_key": {}}[kind]
        tenant = self.foreign_tenant_id if kind == "foreign_tenant" else self.tenant_id
        return headers, tenant


def provision_lead(base_url: str, key: str) -> tuple[str, str]:
    """A trusted (trust 3) agent of the tenant, home fleet F1, and its key."""
    r = httpx.post(base_url + "/api/v1/admin/agent-keys/provision", headers={"X-API-Key": key},
                   json={"agent_id": "fuzz-lead", "initial_trust": 3, "initial_fleet": "F1"})
    assert r.status_code == 201, r.text
    return "fuzz-lead", r.json()["raw_key"]


def seed_rows(target: Target, label: str) -> list[str]:
    """Fresh rows for one operation's run, so by-id cases can hit something real whatever
    earlier runs patched, moved or deleted."""
    ids = []
    for n, fleet in enumerate(["F1", "F1", "F2"]):
        r = httpx.post(target.base_url + "/api/v1/memories",
                       headers={"X-API-Key": target.tenant_key},
                       json={"tenant_id": target.tenant_id, "agent_id": f"seed-{n}",
                             "fleet_id": fleet,
                             "content": f"Seed row {n} for {label} about the {fleet} deploy "
                                        "window and its pager rota"})
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    return ids


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with ReferenceServer(profile=PROFILE, extra_args=SERVER_ARGS) as server:
        tenant_id, key = server.create_tenant()
        foreign_tenant_id, _ = server.create_tenant()
        agent_id, agent_key = provision_lead(server.base_url, key)
        schema = schemathesis.openapi.from_url(server.base_url + "/api/openapi.json")
        with requests.Session() as session:
            yield Target(server, schema, session, tenant_id, key, foreign_tenant_id,
                         agent_id, agent_key)
        log = server.log_tail(100_000)
        assert "Traceback" not in log, log  # no handler crashed on any generated input


def table_counts(server: ReferenceServer) -> dict[str, int]:
    """Row counts of every table (but the agent registry), SQLite file or PostgreSQL."""
    if server.db_url:
        import psycopg

        with psycopg.connect(server.db_url) as db:
            tables = [r[0] for r in db.execute("SELECT tablename FROM pg_tables "
                                               "WHERE schemaname = 'public'")]
            return {t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
                    for t in tables if t not in SIDE_EFFECT_TABLES}
    with sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")
                  if r[0] not in SIDE_EFFECT_TABLES]
        return {t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}


def store_snapshot(target: Target) -> tuple[dict[str, int], list[tuple]]:
    """Row counts of every table in the server's database (but the agent registry), and the
    tenant's memories as the list endpoint shows them (every page, deleted rows included)."""
    counts = table_counts(target.server)
    rows: list[tuple] = []
    params: dict[str, Any] = {"tenant_id": target.tenant_id, "limit": 500,
                              "include_deleted": "true"}
    while True:
        r = httpx.get(target.base_url + "/api/v1/memories", params=params,
                      headers={"X-API-Key": target.tenant_key})
        assert r.status_code == 200, r.text
        page = r.json()
        rows += [(m["id"], m["status"], m["content"], m.get("fleet_id"), m.get("agent_id"),
                  m.get("visibility"), m.get("deleted_at")) for m in page["items"]]
        if not page.get("next_cursor"):
            return counts, sorted(rows, key=repr)
        params["cursor"] = page["next_cursor"]


def aim(case: Any, target: Target, tenant_id: str, kind: str) -> None:
    """Point a generated case at the caller's tenant, so it gets past the tenant check."""
    declares_tenant = any(p.name == "tenant_id" for p in case.operation.query)
    # An optional tenant_id left out means the key's own tenant: a foreign one must be named.
    if declares_tenant and (kind == "foreign_tenant" or "tenant_id" in (case.query or {})):
        case.query = {**(case.query or {}), "tenant_id": tenant_id}
    if isinstance(case.body, dict) and "tenant_id" in case.body:
        case.body["tenant_id"] = tenant_id
    if kind == "agent" and isinstance(case.body, dict) and "agent_id" in case.body:
        case.body["agent_id"] = target.agent_id  # an agent key may only write as itself


def reach_handler(case: Any, target: Target, kind: str, rows: list[str], draw: Any) -> None:
    """Fill in what MemClaw requires beyond the schema (a tenant key names its agent, content
    has 10 non-blank chars, an update changes something, a bulk attempt id is in its
    alphabet, a status body names a status, redistribute names a trusted requester and live
    rows) and aim at a real row, so
    generated values reach the handlers' deeper paths and their success responses get
    checked too."""
    path = case.operation.path
    body = case.body if isinstance(case.body, dict) else None
    if body is not None:
        if kind == "tenant" and path in ("/api/v1/memories", "/api/v1/memories/bulk"):
            body.setdefault("agent_id", "fuzz-writer")
        items = body.get("items")
        for item in [body, *(items if isinstance(items, list) else [])]:
            if isinstance(item, dict) and isinstance(item.get("content"), str):
                item["content"] = item["content"][:9000] + " noted about the deploy window"
        if path == "/api/v1/memories/{memory_id}" and case.method == "PATCH":
            body.setdefault("title", draw(st.text(min_size=1, max_size=80)))  # not empty
        if path.endswith("/redistribute"):
            body["memory_ids"] = draw(st.lists(st.sampled_from(rows), min_size=1))
            body["target_agent_id"] = draw(st.sampled_from(["seed-0", "seed-2", target.agent_id]))
    if path.endswith("/bulk"):  # MemClaw's attempt-id alphabet, which the schema leaves out
        case.headers = {**(case.headers or {}), "X-Bulk-Attempt-Id": draw(ATTEMPT_IDS)}
    if path.endswith("/status"):
        case.body = {**(body or {}), "status": draw(st.sampled_from(STATUSES))}
    if path.endswith("/redistribute"):
        case.query = {**(case.query or {}), "agent_id": target.agent_id}
    if case.path_parameters and "memory_id" in case.path_parameters:
        case.path_parameters["memory_id"] = draw(st.sampled_from(rows))


def assert_envelope(response: requests.Response) -> None:
    body = response.json()
    assert isinstance(body, dict) and "detail" in body, body
    error = body["error"]
    assert error["code"] == WIRE_4XX_CODES[response.status_code], body
    assert isinstance(error["message"], str) and error["message"], body


def assert_success_body(case: Any, response: requests.Response, op_key: str) -> None:
    case.validate_response(response, checks=[response_schema_conformance])
    method, path = op_key.split(" ", 1)
    broker = BROKER["paths"].get(path, {}).get(method.lower(), {}).get("responses", {})
    ref = (broker.get(str(response.status_code), {}).get("content", {})
           .get("application/json", {}).get("schema", {}).get("$ref"))
    name = ref.rsplit("/", 1)[-1] if ref else BROKER_BODIES.get((op_key, response.status_code))
    if name:
        check(response.json(), name)
    if op_key in WIRE_BODY_KEYS:
        missing = WIRE_BODY_KEYS[op_key] - set(response.json())
        assert not missing, f"{op_key} {response.status_code} lacks {missing}: {response.text}"


def send(target: Target, case: Any, headers: dict[str, str]) -> requests.Response:
    return case.call(base_url=target.base_url, session=target.session, headers=headers,
                     timeout=30)


@pytest.mark.parametrize("budget", ["quick", pytest.param("full", marks=pytest.mark.slow)])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_generated_requests_keep_the_wire_contract(target: Target, method: str, path: str,
                                                   mode: GenerationMode, budget: str) -> None:
    op_key = f"{method} {path}"
    operation = target.schema[path][method]
    rows = seed_rows(target, f"{op_key} {mode.value} {budget}")

    @seed(SEED)
    @settings(max_examples=EXAMPLES[budget][mode], deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode), kind=CREDENTIALS, data=st.data())
    def run(case: Any, kind: str, data: st.DataObject) -> None:
        headers, tenant_id = target.credential(kind)
        aim(case, target, tenant_id, kind)
        if mode is GenerationMode.POSITIVE and data.draw(REACH_HANDLER, label="reach handler"):
            reach_handler(case, target, kind, rows, data.draw)
        before = store_snapshot(target) if op_key in WRITES else None
        response = send(target, case, headers)
        status = response.status_code
        statuses.append(status)
        assert status < 500, f"{op_key} answered {status}: {response.text[:500]}"
        if status >= 400:
            assert_envelope(response)
            if before is not None:
                assert store_snapshot(target) == before, f"rejected {op_key} wrote something"
        else:
            assert kind in OWN, f"{kind} credential got {status} on {op_key}"
            assert_success_body(case, response, op_key)

    statuses: list[int] = []
    run()
    # The fuzzing reached the handlers, not only the validation layer and the auth check.
    if mode is GenerationMode.POSITIVE:
        assert any(s < 300 for s in statuses), f"no generated {op_key} succeeded: {statuses}"
