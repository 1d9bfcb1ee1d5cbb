"""The bulk path (reference_server/pipeline/bulk.py) gates and commits items in chunks, with
one embedding pass and one transaction per chunk; each item must still answer as it would
have written one at a time. On every profile, the same 60 items (three chunks) go once as a
bulk and once as single writes into a fresh tenant each: exact duplicates of earlier items
(in the same chunk and across chunks), strong-mode near duplicates, fast-mode advisory near
duplicates, a too-short item and a server-reserved type. The answers must match item for
item, duplicates naming the same earlier item."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest

from reference_server.governance.profiles import PROFILES, get_profile
from reference_server.pipeline.bulk import CHUNK_ITEMS

from .conftest import Api, ServerPool

ALL = tuple(PROFILES)
WORDS = ("harbor lantern copper meadow signal orchard granite velvet ember cobalt willow "
         "falcon quartz saffron tundra beacon marble cinder juniper prism walnut glacier "
         "thistle canyon amber lagoon spruce pebble zephyr mosaic").split()


def _sentence(rng: random.Random, n: int = 60) -> list[str]:
    return [rng.choice(WORDS) + rng.choice(WORDS) for _ in range(n)]  # letters only


def _changed(words: list[str], rng: random.Random, k: int) -> str:
    out = list(words)
    for i in rng.sample(range(len(out)), k):
        out[i] = "different" + rng.choice(WORDS)
    return " ".join(out)


def scenario(seed: int = 25) -> list[dict]:
    """60 items; the comments name what each special one is to an earlier one."""
    rng = random.Random(seed)
    base = {i: _sentence(rng) for i in range(60)}
    items = [{"content": " ".join(base[i])} for i in range(60)]
    items[10] = dict(items[3])                           # exact, same chunk
    items[30] = dict(items[2])                           # exact, next chunk
    items[55] = dict(items[29])                          # exact, next chunk
    items[7] = {"content": "short"}                      # too short: an item error
    items[12] = {"content": " ".join(base[12]), "memory_type": "insight"}  # reserved
    decision = base[14]
    items[14] = {"content": " ".join(decision), "memory_type": "decision"}
    items[16] = {"content": _changed(decision, rng, 1), "memory_type": "decision"}  # near
    items[40] = {"content": _changed(decision, rng, 1), "memory_type": "decision"}  # near
    items[20] = {"content": _changed(base[18], rng, 4)}  # advisory near duplicate of 18
    items[47] = {"content": _changed(base[33], rng, 4)}  # advisory, next chunk
    return items


def as_bulk(api: Api, items: list[dict], attempt: str) -> list[dict]:
    r = api.http.post("/memories/bulk", headers={"X-Bulk-Attempt-Id": attempt},
                      json={"tenant_id": api.tenant_id, "agent_id": "writer",
                            "fleet_id": "fleet-a", "items": items})
    assert r.status_code in (200, 207), r.text
    return r.json()["results"]


def as_singles(api: Api, items: list[dict]) -> list[dict]:
    """Each item written alone, its answer in the bulk's per-item shape."""
    out = []
    for i, item in enumerate(items):
        r = api.write(agent_id="writer", fleet_id="fleet-a", **item)
        if r.status_code == 201:
            out.append({"index": i, "status": "created", "id": r.json()["id"]})
        elif r.status_code == 409:
            out.append({"index": i, "status": "duplicate_content",
                        "duplicate_of": r.json()["detail"].rsplit(": ", 1)[1]})
        else:
            assert r.status_code == 422, r.text
            out.append({"index": i, "status": "error"})
    return out


def outcomes(api: Api, results: list[dict]) -> list[tuple]:
    """(status, index of the item a duplicate names, index of the advisory near duplicate)
    per item: ids differ between two tenants, the items they name must not."""
    index = {r["id"]: r["index"] for r in results if r["status"] == "created"}
    out = []
    for r in results:
        near = None
        if r["status"] == "created":
            got = api.get(r["id"])
            assert got.status_code == 200, got.text
            named = got.json()["metadata"].get("near_duplicate_of")
            near = index.get(named, named)
        out.append((r["status"], index.get(r.get("duplicate_of")), near))
    return out


@pytest.fixture(params=ALL)
def pair(request: pytest.FixtureRequest, pool: ServerPool) -> Iterator[tuple[str, Api, Api]]:
    bulk, single = pool.tenant_api(request.param), pool.tenant_api(request.param)
    yield request.param, bulk, single
    bulk.close()
    single.close()


def test_a_bulk_answers_as_its_items_one_at_a_time(pair: tuple[str, Api, Api]) -> None:
    profile, bulk_api, single_api = pair
    items = scenario()
    assert len(items) > 2 * CHUNK_ITEMS  # the scenario spans three chunks
    attempt = uuid.uuid4().hex
    bulk = as_bulk(bulk_api, items, attempt)
    got = outcomes(bulk_api, bulk)
    expected = outcomes(single_api, as_singles(single_api, items))
    assert got == expected
    # the scenario exercises what the profile's steps decide (else the comparison is empty)
    steps = get_profile(profile).write_steps
    assert got[7][0] == got[12][0] == "error"
    if "check_exact_duplicate" in steps:
        assert [got[i][:2] for i in (10, 30, 55)] == [("duplicate_content", 3),
                                                      ("duplicate_content", 2),
                                                      ("duplicate_content", 29)]
    if "check_near_duplicate" in steps:
        assert [got[i][:2] for i in (16, 40)] == [("duplicate_content", 14)] * 2
    if "detect_near_duplicate" in steps:
        assert (got[20][2], got[47][2]) == (18, 33)
    # the same attempt again: every written item is a replay of itself, the rest as before
    again = as_bulk(bulk_api, items, attempt)
    for first, second in zip(bulk, again, strict=True):
        if first["status"] == "created":
            assert (second["status"], second["id"]) == ("duplicate_attempt", first["id"])
        else:
            assert second["status"] == first["status"]
            assert second["duplicate_of"] == first["duplicate_of"]


def test_a_bulk_item_error_writes_its_siblings(pool: ServerPool) -> None:
    """Per-item answers, never a partial item: the chunk holding a refused item still
    commits the others (MemClaw's 207)."""
    api = pool.tenant_api("memclaw-2026-05-31")
    items = [{"content": f"sibling row {w} about the quarterly rota"} for w in WORDS[:5]]
    items[2] = {"content": "  tiny  "}
    r = api.http.post("/memories/bulk", headers={"X-Bulk-Attempt-Id": uuid.uuid4().hex},
                      json={"tenant_id": api.tenant_id, "agent_id": "w", "items": items})
    assert r.status_code == 207, r.text
    body = r.json()
    assert (body["created"], body["errors"]) == (4, 1)
    ids = {x["id"] for x in api.list(limit=50).json()["items"]}
    assert ids == {x["id"] for x in body["results"] if x["status"] == "created"}
    api.close()
