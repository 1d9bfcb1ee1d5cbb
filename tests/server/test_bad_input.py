"""Bad input: a 4xx with MemClaw's envelope, never a 5xx, never a partial write."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from .conftest import Api, ServerPool

NIL = "00000000-0000-0000-0000-000000000000"
VALID = {"agent_id": "w", "content": "A perfectly valid memory about the deploy window"}


@pytest.fixture(scope="module")
def api(pool: ServerPool) -> Iterator[Api]:
    api = pool.tenant_api("memclaw-2026-05-31")
    yield api
    api.close()
    log = pool["memclaw-2026-05-31"].log_tail(100_000)
    assert "Traceback" not in log, log  # no handler ever crashed on this input


def stored_count(api: Api) -> int:
    r = api.list(limit=500, include_deleted="true")
    assert r.status_code == 200
    return len(r.json()["items"])


def write_body(api: Api, **override: object) -> bytes:
    return json.dumps({"tenant_id": api.tenant_id, **VALID, **override}).encode()


def bad_requests(api: Api) -> list[tuple[str, str, bytes | None, dict]]:
    """(method, path, raw body, headers): each must be refused with a 4xx."""
    t = api.tenant_id
    w, s = "/memories", "/search"
    search = {"tenant_id": t, "query": "deploy window"}
    cases: list[tuple[str, str, bytes | None, dict]] = [
        # malformed JSON
        ("POST", w, b'{"tenant_id": ', {}),
        ("POST", w, b"not json at all", {}),
        ("POST", w, b"[]", {}),
        ("POST", w, b"null", {}),
        ("POST", w, b'"a string"', {}),
        ("POST", w, b"", {}),
        ("POST", w, b'{"content": "\xff\xfe broken utf-8"}', {}),
        ("POST", w, b"[" * 200_000 + b"]" * 200_000, {}),
        ("POST", s, b"{,}", {}),
        # wrong types and invalid values
        ("POST", w, write_body(api, content=123), {}),
        ("POST", w, write_body(api, content=None), {}),
        ("POST", w, write_body(api, content=["a list"]), {}),
        ("POST", w, write_body(api, weight=2.0), {}),
        ("POST", w, write_body(api, weight="heavy"), {}),
        ("POST", w, write_body(api, metadata="not an object"), {}),
        ("POST", w, write_body(api, visibility="public"), {}),
        ("POST", w, write_body(api, status="bogus"), {}),
        ("POST", w, write_body(api, memory_type="outcome"), {}),
        ("POST", w, write_body(api, memory_type="nope"), {}),
        ("POST", w, write_body(api, write_mode="turbo"), {}),
        ("POST", w, write_body(api, write_mode="stm"), {}),
        ("POST", w, write_body(api, persist="maybe"), {}),
        ("POST", w, write_body(api, entity_links=[{"entity_id": "not-a-uuid"}]), {}),
        ("POST", w, write_body(api, subject_entity_id="nope"), {}),
        ("POST", w, write_body(api, expires_at="yesterday"), {}),
        ("POST", s, json.dumps({**search, "top_k": "five"}).encode(), {}),
        ("POST", s, json.dumps({**search, "top_k": 0}).encode(), {}),
        ("POST", s, json.dumps({**search, "top_k": 21}).encode(), {}),
        ("POST", s, json.dumps({**search, "fleet_ids": "F1"}).encode(), {}),
        ("POST", s, json.dumps({**search, "status_filter": "gone"}).encode(), {}),
        # unknown / foreign tenant
        ("POST", w, write_body(api, tenant_id="no-such-tenant"), {}),
        ("POST", s, json.dumps({**search, "tenant_id": "no-such-tenant"}).encode(), {}),
        ("GET", f"/memories/{NIL}?tenant_id=no-such-tenant", None, {}),
        ("GET", "/memories?tenant_id=no-such-tenant", None, {}),
        # invalid UUIDs and missing ids
        ("GET", f"/memories/not-a-uuid?tenant_id={t}", None, {}),
        ("GET", f"/memories/123/contradictions?tenant_id={t}", None, {}),
        ("GET", f"/memories/{NIL}?tenant_id={t}", None, {}),
        ("GET", f"/memories/{NIL}", None, {}),
        ("PATCH", f"/memories/zzz/status?tenant_id={t}", b'{"status": "active"}', {}),
        ("PATCH", f"/memories/{NIL}/status?tenant_id={t}", b'{"status": "nope"}', {}),
        ("PATCH", f"/memories/{NIL}?tenant_id={t}", b'{"title": "x"}', {}),
        ("DELETE", f"/memories/%00?tenant_id={t}", None, {}),
        ("GET", f"/entities/not-a-uuid?tenant_id={t}", None, {}),
        ("POST", f"/memories/redistribute?tenant_id={t}&agent_id=a",
         b'{"memory_ids": ["nope"], "target_agent_id": "b"}', {}),
        ("POST", f"/memories/redistribute?tenant_id={t}&agent_id=a",
         b'{"memory_ids": [], "target_agent_id": "b"}', {}),
        ("GET", f"/memories?tenant_id={t}&limit=0", None, {}),
        ("GET", f"/memories?tenant_id={t}&limit=abc", None, {}),
        ("GET", f"/memories?tenant_id={t}&sort=bogus", None, {}),
        ("GET", f"/memories?tenant_id={t}&cursor=%%%garbage", None, {}),
        # odd unicode that no store can hold (lone surrogates)
        ("POST", w, write_body(api, content="lone surrogate \ud800 inside a memory"), {}),
        ("POST", s, json.dumps({**search, "query": "\udfff"}).encode(), {}),
        ("GET", "/memories?tenant_id=%ED%A0%80", None, {}),
        # empty strings
        ("POST", w, write_body(api, content=""), {}),
        ("POST", w, write_body(api, content="   \n\t   "), {}),
        ("POST", w, write_body(api, agent_id=""), {}),
        ("POST", w, write_body(api, tenant_id=""), {}),
        ("POST", s, json.dumps({**search, "query": ""}).encode(), {}),
        ("POST", w, write_body(api, metadata={"idempotency_key": "   "}), {}),
        ("POST", w, write_body(api), {"Idempotency-Key": "k" * 256}),
        # credentials
        ("POST", w, write_body(api), {"X-API-Key": ""}),
        ("POST", w, write_body(api), {"X-API-Key": "mc_not-a-key"}),
        # content types and sizes
        ("POST", w, write_body(api), {"Content-Type": "text/plain"}),
        ("POST", w, write_body(api, content="x" * (2 * 1024 * 1024)), {}),
    ]
    return cases


def test_bad_inputs_get_an_enveloped_4xx_and_write_nothing(api: Api) -> None:
    existing = api.write("An existing row that bad updates must leave intact", agent_id="w")
    before = stored_count(api)
    row_path = f"/memories/{existing.json()['id']}?tenant_id={api.tenant_id}"
    updates = [b'{"content": null, "visibility": null, "status": null, "weight": null}',
               b'{"content": "short"}', b'{"memory_type": "rule"}', b'{"weight": -1}',
               b'{"metadata_mode": "append", "metadata": {}}', b'{}', b'[1, 2]']
    failures = []
    cases = bad_requests(api) + [("PATCH", row_path, u, {}) for u in updates]
    for method, path, body, headers in cases:
        hdrs = {"Content-Type": "application/json", **headers}
        r = api.http.request(method, path, content=body, headers=hdrs)
        ok = 400 <= r.status_code < 500
        try:
            envelope = r.json()
            ok = ok and "detail" in envelope and {"code", "message"} <= set(envelope["error"])
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            failures.append(f"{method} {path[:60]} {body[:60] if body else body!r}: "
                            f"{r.status_code} {r.text[:200]}")
    assert not failures, "\n".join(failures)
    assert stored_count(api) == before
    assert api.get(existing.json()["id"]).json()["content"] == existing.json()["content"]


def test_streamed_body_over_1_mib_is_413(api: Api) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(5):
            yield b" " * (300 * 1024)

    r = api.http.post("/memories", content=chunks(),
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_missing_agent_id_is_a_validation_error(api: Api) -> None:
    r = api.write("Tenant key writes must name the writing agent")
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "agent_id"]


@pytest.mark.parametrize("content", [
    "Zero\u200bwidth\u200djoiners and \ufeff BOM inside the memory text",
    "Right-to-left \u202e override and Arabic \u0645\u0631\u062d\u0628\u0627 text",
    "Emoji \U0001f680\U0001f525 and combining e\u0301 in a memory about launches",
    "NUL \u0000 byte and control \u0007 chars in a memory about parsing",
])
def test_odd_but_valid_unicode_round_trips(api: Api, content: str) -> None:
    r = api.write(content, agent_id="unicode")
    assert r.status_code == 201, r.text
    assert api.get(r.json()["id"]).json()["content"] == content
    assert r.json()["id"] in {i["id"] for i in api.search(content, top_k=20).json()["items"]}


def test_client_agent_header_grants_no_identity(pool: ServerPool) -> None:
    """X-Agent-ID is ignored: a tenant key stays identity-less (no private rows in search)."""
    api = pool.tenant_api("memclaw-2026-05-31")
    author = api.provision("author", "F1")
    row = author.write("Author's private note about the release checklist",
                       visibility="scope_agent").json()
    spoof = {"X-Agent-ID": "author"}
    who = api.http.get("/whoami", headers=spoof).json()
    assert who["agent_id"] is None and who["tenant_id"] == api.tenant_id
    r = api.http.post("/search", headers=spoof, json={"tenant_id": api.tenant_id,
                                                      "query": row["content"]})
    assert row["id"] not in {i["id"] for i in r.json()["items"]}
    assert author.search(row["content"]).json()["items"][0]["id"] == row["id"]
    assert httpx.get(api.base_url + "/api/v1/whoami").json()["auth_source"] == "anonymous"
