"""Wire conformance: response bodies of the shared endpoints validate against MemClaw's own
frozen contract (`fixtures/openapi.broker.json`, copied from MemClaw core-api V-Aug,
Apache-2.0), and every broker path/method is served."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import jsonschema
import pytest

from .conftest import Api, ServerPool

BROKER = json.loads((Path(__file__).parent / "fixtures" / "openapi.broker.json").read_text())
FORMATS = jsonschema.Draft202012Validator.FORMAT_CHECKER


def check(instance: object, schema_name: str) -> None:
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": BROKER["components"]}
    jsonschema.Draft202012Validator(schema, format_checker=FORMATS).validate(instance)


def response_schema(path: str, method: str, status: int) -> str | None:
    content = BROKER["paths"][path][method]["responses"][str(status)].get("content", {})
    ref = content.get("application/json", {}).get("schema", {}).get("$ref")
    return ref.rsplit("/", 1)[-1] if ref else None


@pytest.fixture(scope="module")
def api(pool: ServerPool) -> Api:
    return pool.tenant_api("memclaw-2026-05-30")


@pytest.fixture(scope="module")
def written(api: Api) -> dict:
    entity = api.http.post("/entities/upsert", json={"tenant_id": api.tenant_id,
                                                     "entity_type": "service",
                                                     "canonical_name": "billing-api"}).json()
    r = api.write("Billing API runs on the blue cluster in the Frankfurt region",
                  agent_id="writer", fleet_id="ops", entity_links=[{"entity_id": entity["id"],
                                                                    "role": "subject"}],
                  subject_entity_id=entity["id"], predicate="region", object_value="Frankfurt",
                  metadata={"derived_from": None, "k": 1})
    assert r.status_code == 201, r.text
    return r.json()


def test_write_returns_memory_out(written: dict) -> None:
    check(written, "MemoryOut")
    assert written["usage"] is not None and written["created_at"].endswith("Z")


def test_get_by_id_returns_memory_detail(api: Api, written: dict) -> None:
    r = api.get(written["id"])
    assert r.status_code == 200
    check(r.json(), response_schema("/api/v1/memories/{memory_id}", "get", 200))
    body = r.json()
    assert body["created_at"].endswith("+00:00") and body["content_hash"]
    assert body["entity_links"][0]["canonical_name"] == "billing-api"
    assert len(body["embedding_preview"]) == 20 and body["embedding_stats"]["dimensions"] > 20


def test_list_returns_paginated_response(api: Api, written: dict) -> None:
    r = api.list(limit=1)
    assert r.status_code == 200
    check(r.json(), response_schema("/api/v1/memories", "get", 200))


def test_search_returns_search_response(api: Api, written: dict) -> None:
    r = api.search("Billing API cluster region", fleet_ids=["ops"])
    assert r.status_code == 200
    check(r.json(), response_schema("/api/v1/search", "post", 200))
    assert r.json()["items"][0]["id"] == written["id"]


def test_patch_returns_memory_out(api: Api, written: dict) -> None:
    r = api.http.patch(f"/memories/{written['id']}", params={"tenant_id": api.tenant_id},
                       json={"title": "Billing placement", "metadata": {"k": 2}})
    assert r.status_code == 200, r.text
    check(r.json(), response_schema("/api/v1/memories/{memory_id}", "patch", 200))
    assert r.json()["metadata"]["k"] == 2 and "write_mode" in r.json()["metadata"]
    assert api.http.patch(f"/memories/{written['id']}", params={"tenant_id": api.tenant_id},
                          json={}).status_code == 400


@pytest.mark.parametrize("items,status", [
    (["Bulk item one about the deploy freeze window", "Bulk item two about the pager rota"],
     200),
    (["Bulk item three about the backup policy", "short"], 207),
])
def test_bulk_returns_bulk_response(api: Api, items: list[str], status: int) -> None:
    attempt = uuid.uuid4().hex
    body = {"tenant_id": api.tenant_id, "agent_id": "bulk-writer",
            "items": [{"content": c} for c in items]}
    r = api.http.post("/memories/bulk", json=body, headers={"X-Bulk-Attempt-Id": attempt})
    assert r.status_code == status, r.text
    check(r.json(), response_schema("/api/v1/memories/bulk", "post", status))
    again = api.http.post("/memories/bulk", json=body, headers={"X-Bulk-Attempt-Id": attempt})
    first_status = r.json()["results"][0]["status"]
    assert first_status == "created"
    assert again.json()["results"][0]["status"] == "duplicate_attempt"
    missing = api.http.post("/memories/bulk", json=body)
    assert missing.status_code == 400
    assert missing.json()["detail"] == "Missing required X-Bulk-Attempt-Id header"


def test_delete_returns_204_then_404(api: Api) -> None:
    row = api.write("A row that is about to be deleted by the test", agent_id="w").json()
    r = api.http.delete(f"/memories/{row['id']}", params={"tenant_id": api.tenant_id})
    assert r.status_code == 204 and r.content == b""
    assert api.get(row["id"]).status_code == 404


def test_validation_error_matches_http_validation_error(api: Api) -> None:
    r = api.search("anything", top_k=50)
    assert r.status_code == 422
    body = r.json()
    check({"detail": body["detail"]}, "HTTPValidationError")
    assert body["error"]["code"] == "INVALID_ARGUMENTS"
    assert body["error"]["message"] == "Input should be less than or equal to 20"
    assert body["error"]["details"]["errors"] == body["detail"]


def test_every_broker_operation_is_served(pool: ServerPool) -> None:
    ours = httpx.get(pool["memclaw-2026-05-30"].base_url + "/api/openapi.json").json()
    for path, operations in BROKER["paths"].items():
        for method in operations:
            assert method in ours["paths"].get(path, {}), f"{method.upper()} {path} missing"


def test_health_and_version(pool: ServerPool) -> None:
    base = pool["memclaw-2026-05-30"].base_url
    assert httpx.get(base + "/api/v1/health").json()["status"] == "ok"
    version = httpx.get(base + "/api/v1/version").json()
    assert version["engine"] == "fleetprobe-reference"
    assert version["profile"] == "memclaw-2026-05-30"
    assert version["latency_simulated"] is False
    # this pool's servers run with raised limits; the profile defaults are checked elsewhere
    assert set(version["rate_limits"]) == {"write", "search", "bulk"}
