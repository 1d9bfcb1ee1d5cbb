"""One conformance suite for every `Storage` backend: SQLite (always) and PostgreSQL + pgvector
(`make test-pg`, which sets FLEETPROBE_DB=postgres and runs an embedded server from a wheel).

The scope rules live in Python (`scope.search_row_visible`); PostgreSQL applies them as SQL
(`scope.search_predicate_sql`). The tests below check, over an enumerated set of rows and
principals, that the SQL admits exactly the rows the Python rule admits, and that a store's
scoped similarity search returns exactly those rows, most similar first. Rows carry distinct
random unit vectors: HNSW over identical vectors is degenerate, which would test the index,
not the predicate.

The HTTP-level server tests (tests/server, tests/harness) run on PostgreSQL too under
FLEETPROBE_DB=postgres: `ReferenceServer` then stores in a fresh PostgreSQL database.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from reference_server.governance.profiles import get_profile
from reference_server.governance.scope import (
    SearchFilter,
    SearchScope,
    Viewer,
    search_predicate_sql,
)
from reference_server.storage import (
    AgentRow,
    IdempotencyRecord,
    KeyRow,
    ListFilter,
    NewMemory,
    SqliteStorage,
    Storage,
    open_storage,
)

DIM = 16
PG = os.environ.get("FLEETPROBE_DB") == "postgres"
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.skipif(
        not PG, reason="PostgreSQL backend: make test-pg (FLEETPROBE_DB=postgres)")),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def open_store(backend: str, tmp_path: Path) -> Iterator[Callable[..., Storage]]:
    """Opens (and reopens) one store of the backend; closes every handle at the end."""
    if backend == "postgres":
        from reference_server.launch.embedded_pg import shared_database_url

        location: Path | str = shared_database_url()
    else:
        location = tmp_path / "store.db"
    handles: list[Storage] = []

    def open_(vector_search: str = "exact") -> Storage:
        handles.append(open_storage(location, DIM, vector_search))
        return handles[-1]

    yield open_
    for handle in handles:
        handle.close()


@pytest.fixture
def store(open_store: Callable[[], Storage]) -> Storage:
    return open_store()


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def memory(mid: str, tenant: str = "t1", **fields: object) -> dict:
    row = {"id": mid, "tenant_id": tenant, "fleet_id": "f1", "agent_id": "a1",
           "memory_type": "fact", "title": None, "content": f"content of {mid}",
           "weight": 0.5, "source_uri": None, "run_id": None, "metadata": {"k": mid},
           "content_hash": f"h-{mid}", "client_request_id": None,
           "created_at": f"2026-01-01T00:00:{len(mid):02d}.000000+00:00", "expires_at": None,
           "deleted_at": None, "ts_valid_start": None, "ts_valid_end": None,
           "subject_entity_id": None, "predicate": None, "object_value": None,
           "status": "active", "visibility": "scope_team", "recall_count": 0,
           "last_recalled_at": None, "supersedes_id": None}
    row.update(fields)
    return row


def strip(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in ("_rowid", "embedding")}


# --- the enumerated scope set ---------------------------------------------------------------

FLEETS = (None, "f1", "f2")
VISIBILITIES = ("scope_agent", "scope_team", "scope_org")
AGENTS = ("a1", "a2")
STATUSES = ("active", "pending", "outdated", "conflicted")
DELETED = (None, "2026-02-01T00:00:00.000000+00:00")
TYPES = ("fact", "episode")
VALID_STARTS = (None, "2026-01-01T00:00:00.000000+00:00", "2026-06-01T00:00:00.000000+00:00")


def enumerated_rows() -> list[dict]:
    rows = []
    for i, (fleet, vis, agent, status, deleted, mtype, start) in enumerate(itertools.product(
            FLEETS, VISIBILITIES, AGENTS, STATUSES, DELETED, TYPES, VALID_STARTS)):
        rows.append(memory(f"m{i:04d}", fleet_id=fleet, visibility=vis, agent_id=agent,
                           status=status, deleted_at=deleted, memory_type=mtype,
                           ts_valid_start=start))
    return rows


def enumerated_filters() -> list[SearchFilter]:
    filters = []
    for profile_name, viewer, fleet_ids, agent_filter, status, mtype, valid_at in (
            itertools.product(("memclaw-2026-05-30", "naive"), (None, "a1", "a2"),
                              ((), ("f1",), ("f1", "f2")), (None, "a1"),
                              (None, "outdated", "conflicted", "active"), (None, "fact"),
                              (None, "2026-03-01T00:00:00.000000+00:00"))):
        scope = SearchScope(Viewer(viewer), fleet_ids, agent_filter, status, mtype)
        filters.append(SearchFilter(get_profile(profile_name), scope, valid_at))
    return filters


ROWS = enumerated_rows()
FILTERS = enumerated_filters()


def test_enumeration_covers_both_outcomes() -> None:
    """The set is not degenerate: every filter admits some rows and refuses others, and
    between them the filters admit every live, non-deleted row somewhere."""
    admitted = [{r["id"] for r in ROWS if f.admits(r)} for f in FILTERS]
    assert all(len(a) < len(ROWS) for a in admitted)  # deleted rows: never
    assert sum(1 for a in admitted if not a) < len(FILTERS) // 4
    live = {r["id"] for r in ROWS if r["deleted_at"] is None}
    assert set().union(*admitted) == live


def test_sql_predicate_is_the_python_rule(backend: str, store: Storage) -> None:
    """`search_predicate_sql` (plus valid_at) selects exactly what `SearchFilter.admits`
    admits, for every enumerated row and principal, evaluated by the backend's own SQL."""
    rng = np.random.default_rng(13)
    if backend == "postgres":
        store.insert_many(ROWS, [unit(rng) for _ in ROWS])
        run = store._all  # type: ignore[attr-defined]
        mark = "%s"
    else:
        db = sqlite3.connect(":memory:")
        db.row_factory = sqlite3.Row
        cols = ", ".join(ROWS[0])
        db.execute(f"CREATE TABLE memories ({cols})")
        db.executemany(f"INSERT INTO memories VALUES ({', '.join('?' for _ in ROWS[0])})",
                       [tuple(str(v) if isinstance(v, dict) else v for v in r.values())
                        for r in ROWS])
        run = lambda sql, args: db.execute(sql, args).fetchall()  # noqa: E731
        mark = "?"
    mismatches = []
    for flt in FILTERS:
        clause, args = flt.sql(mark)
        got = {r["id"] for r in run(f"SELECT id FROM memories WHERE tenant_id = {mark} "
                                    f"AND {clause}", ["t1", *args])}
        want = {r["id"] for r in ROWS if flt.admits(r)}
        if got != want:
            mismatches.append((flt, sorted(got ^ want)[:5]))
    assert not mismatches, mismatches[:3]


def test_predicate_without_governance_keeps_only_the_hard_filters() -> None:
    naive = get_profile("naive")
    clause, args = search_predicate_sql(naive, SearchScope(Viewer(None), ("f1",), None, None,
                                                           None))
    assert "fleet_id" not in clause and "scope_agent" not in clause
    assert "deleted_at IS NULL" in clause and args == ["outdated", "conflicted"]


@pytest.mark.parametrize("vector_search", ["exact", "hnsw", "hnsw-walk"])
def test_scoped_similarity_search_returns_exactly_the_visible_rows(
        backend: str, open_store: Callable[..., Storage], vector_search: str) -> None:
    """The store's scoped search (exact ranking; on PostgreSQL also an HNSW store, which
    ranks fleet-scoped searches exactly, and its index walk forced with the predicate in the
    SQL) returns every row the Python rule admits and no other, in similarity order."""
    if backend == "sqlite" and vector_search != "exact":
        pytest.skip("SQLite ranks exactly only")
    store = open_store(vector_search.split("-")[0])
    store.scoped_by_index = vector_search == "hnsw-walk"  # type: ignore[attr-defined]
    rng = np.random.default_rng(7)
    vectors = [unit(rng) for _ in ROWS]
    store.insert_many(ROWS, vectors)
    store.insert_many([memory("other-tenant", tenant="t2")], [vectors[0]])
    if vector_search != "exact":
        store.tune(enable_seqscan="off", enable_bitmapscan="off",  # type: ignore[attr-defined]
                   enable_sort="off")
        plan = store._all(  # type: ignore[attr-defined]
            "EXPLAIN SELECT id FROM memories WHERE tenant_id = 't1' "
            "ORDER BY embedding <#> %s LIMIT 10", (vectors[0],))
        assert "ix_memories_embedding" in " ".join(r["QUERY PLAN"] for r in plan)
    matrix = np.stack(vectors)
    for i, flt in enumerate(FILTERS[::4]):
        query = unit(rng)
        got = list(store.similar_rows("t1", query, -2.0, flt))
        want = [r["id"] for r in ROWS if flt.admits(r)]
        assert sorted(r["id"] for r, _ in got) == sorted(want), (i, flt)
        sims = [s for _, s in got]
        assert sims == sorted(sims, reverse=True)
        exact = {r["id"]: float(matrix[j] @ query) for j, r in enumerate(ROWS)}
        assert all(abs(exact[r["id"]] - s) < 1e-4 for r, s in got)


@pytest.mark.parametrize("named", [("f1",), ("f1", "f2"), ()])
def test_long_fleet_lists_select_what_short_ones_do(store: Storage, named: tuple) -> None:
    """A `fleet_ids` list of hundreds of absent ids beside the named ones admits the same rows
    as the named ones alone (PostgreSQL cuts long lists to the tenant's fleets first); with
    no named fleet present, only NULL-fleet and org rows remain, as the Python rule says."""
    rng = np.random.default_rng(5)
    store.insert_many(ROWS, [unit(rng) for _ in ROWS])
    absent = tuple(f"absent-{i}" for i in range(400))
    viewer = Viewer("a1")
    for profile in ("memclaw-2026-05-30", "naive"):
        flt = SearchFilter(get_profile(profile),
                           SearchScope(viewer, frozenset(named + absent), None, None, None))
        got = sorted(r["id"] for r, _ in store.similar_rows("t1", unit(rng), -2.0, flt))
        assert got == sorted(r["id"] for r in ROWS if flt.admits(r)), profile
        assert got, profile


def test_similarity_threshold_and_order_are_exact(store: Storage) -> None:
    rng = np.random.default_rng(3)
    rows = [memory(f"s{i:03d}") for i in range(300)]
    vectors = [unit(rng) for _ in rows]
    store.insert_many(rows, vectors)
    query = unit(rng)
    sims = np.stack(vectors) @ query
    want = [rows[i]["id"] for i in np.argsort(-sims, kind="stable") if sims[i] >= 0.2]
    got = [r["id"] for r, _ in store.similar_rows("t1", query, 0.2)]
    assert got == want
    rowids, ranked = store.ranked_by_similarity("t1", query, 0.2)
    by_rowid = store.rows_by_rowids(rowids.tolist())
    assert [by_rowid[r]["id"] for r in rowids.tolist()] == want
    assert np.all(np.diff(ranked) <= 1e-6)
    assert list(store.similar_rows("nobody", query, -2.0)) == []


def test_sqlite_partial_sort_keeps_ties_in_insertion_order(tmp_path: Path) -> None:
    """The SQLite scan sorts only the best rows first; ties across that cut stay exact."""
    store = SqliteStorage(tmp_path / "ties.db", DIM)
    v = unit(np.random.default_rng(1))
    rows = [memory(f"tie{i:04d}") for i in range(600)]
    store.insert_many(rows, [v] * len(rows))
    got = [r["id"] for r, _ in store.similar_rows("t1", v, 0.5)]
    assert got == [r["id"] for r in rows]
    store.close()


def _separated_vectors(count: int) -> list[np.ndarray]:
    """Unit vectors whose cosines with the first axis are 0.9, 0.8, ...: rows sharing one
    tie exactly, rows of two differ far beyond any float rounding, so the exact order
    (similarity, then insertion order) is the same whoever computes it."""
    vectors = []
    for i in range(count):
        v = np.zeros(DIM, dtype=np.float32)
        v[0], v[1 + i % (DIM - 1)] = 0.9 - 0.1 * i, np.sqrt(1 - (0.9 - 0.1 * i) ** 2)
        vectors.append(v)
    return vectors


def test_scoped_ranking_is_exact_with_ties_across_fleets_and_after_changes(
        store: Storage) -> None:
    """A scoped search returns the admitted rows in exact order (most similar first, ties in
    insertion order) across fleets, fleet-less and org-visible rows, also after the store
    has served searches and then took new rows, re-embedded rows, a row turned org-visible
    and back, and a deleted row: the SQLite store ranks per-fleet blocks kept in memory,
    which must follow every one of those changes."""
    query = np.eye(DIM, dtype=np.float32)[0]
    groups = _separated_vectors(4)
    fleets = (None, "f1", "f2", "f3")
    rows, group_of = [], {}
    for i, (fleet, vis, g) in enumerate(itertools.product(
            fleets, ("scope_team", "scope_org", "scope_agent"), range(4))):
        rows.append(memory(f"r{i:03d}", fleet_id=fleet, visibility=vis))
        group_of[rows[-1]["id"]] = g
    store.insert_many(rows, [groups[group_of[r["id"]]] for r in rows])
    order = [r["id"] for r in rows]  # insertion order = rowid order
    filters = [SearchFilter(get_profile(p), SearchScope(Viewer(v), frozenset(f), None, None,
                                                        None))
               for p in ("memclaw-2026-05-30", "naive") for v in (None, "a1")
               for f in ((), ("f1",), ("f2", "f3"), ("f1", "absent"))]
    current = {r["id"]: r for r in rows}

    def check(stage: str) -> None:
        for flt in filters:
            got = [r["id"] for r, _ in store.similar_rows("t1", query, 0.05, flt)]
            want = sorted((i for i in order if flt.admits(current[i])),
                          key=lambda i: (-groups[group_of[i]][0], order.index(i)))
            assert got == want, (stage, flt.profile.name, flt.scope)

    check("loaded")
    added = [memory(f"n{i}", fleet_id=f, visibility=v)
             for i, (f, v) in enumerate([("f1", "scope_team"), ("f4", "scope_team"),
                                         (None, "scope_org"), ("f2", "scope_org")])]
    for i, row in enumerate(added):
        store.insert_memory(row, groups[i % 4])
        group_of[row["id"]] = i % 4
        current[row["id"]] = row
        order.append(row["id"])
    for mid, changes, g in (("r001", {"content": "re-embedded"}, 0),  # team, group 1 -> 0
                            ("r004", {"visibility": "scope_team"}, None),  # org -> team
                            ("r013", {"visibility": "scope_org"}, None),  # team -> org
                            ("r016", {"visibility": "scope_team", "content": "x"}, 3)):
        store.update_memory(store.get_memory("t1", mid), changes,
                            None if g is None else groups[g], None)
        current[mid] = {**current[mid], **changes}
        group_of[mid] = group_of[mid] if g is None else g
    store.soft_delete("t1", "r014")
    current["r014"] = {**current["r014"], "deleted_at": "now", "status": "deleted"}
    check("changed")
    rowids, _ = store.ranked_by_similarity("t1", query, 0.05)
    by_rowid = store.rows_by_rowids(rowids.tolist())
    assert [by_rowid[r]["id"] for r in rowids.tolist()] == sorted(
        order, key=lambda i: (-groups[group_of[i]][0], order.index(i)))


# --- the rest of the protocol -------------------------------------------------------------

def test_tenants_keys_agents(store: Storage) -> None:
    assert store.create_tenant("t1") is True
    assert store.create_tenant("t1") is False
    assert store.tenant_exists("t1") and not store.tenant_exists("t9")
    key = KeyRow("k1", "t1", "a1", "agent", "fp_ab", "2026-01-01")
    store.add_key("hash1", key, label="x")
    store.add_key("hash1", key, label="again")  # replace, not duplicate
    assert store.find_key("hash1") == key and store.find_key("nope") is None
    store.upsert_agent(AgentRow("t1", "a1", "f1", 1, "Ann"))
    first = store.get_agent("t1", "a1")
    store.upsert_agent(AgentRow("t1", "a1", "f2", 3, "Ann", first.created_at))
    agent = store.get_agent("t1", "a1")
    assert (agent.fleet_id, agent.trust_level, agent.created_at) == ("f2", 3, first.created_at)
    assert store.get_agent("t2", "a1") is None


def test_insert_read_back_and_survive_reopen(open_store: Callable[[], Storage]) -> None:
    store = open_store()
    rng = np.random.default_rng(5)
    v = unit(rng)
    row = memory("m1", content="NUL \x00 and \ue000 private-use text", fleet_id=None)
    idem = IdempotencyRecord("t1", "idem-1", "rh", 201, '{"id": "m1"}')
    store.insert_memory(row, v, [("e1", "subject"), ("e2", None)], 123.0, idem)
    store.close()
    store = open_store()  # committed means durable across a reopen
    got = store.get_memory("t1", "m1")
    assert strip(got) == row
    assert np.frombuffer(got["embedding"], dtype=np.float32).tolist() == v.tolist()
    assert store.get_memory("t2", "m1") is None
    assert [strip(r) for r in store.memories_by_ids("t1", ["m1", "zz"])] == [row]
    assert store.get_idempotency("t1", "idem-1") == idem
    assert store.get_idempotency("t1", "idem-2") is None
    links = store.entity_links_of(["m1"])["m1"]
    assert sorted(links, key=str) == sorted([{"entity_id": "e1", "role": "subject"},
                                             {"entity_id": "e2", "role": None}], key=str)
    assert store.detection_pending("m1") and store.next_due_at() == 123.0
    assert store.due_jobs(100.0) == [] and store.due_jobs(200.0) == [("m1", "t1")]
    assert store.find_exact_duplicate("t1", None, "a1", "h-m1") == "m1"
    assert store.find_exact_duplicate("t1", "f1", "a1", "h-m1") is None
    assert store.find_exact_duplicate("t1", None, "a2", "h-m1") is None


def test_insert_memories_commits_a_chunk_together_in_order(store: Storage) -> None:
    """A bulk chunk: rows, links, jobs and idempotency records in one transaction, rowids in
    the given order (similarity ties rank in insertion order), all or nothing."""
    rng = np.random.default_rng(9)
    v = unit(rng)
    idem = IdempotencyRecord("t1", "idem-c", "rh", 201, '{"id": "c2"}')
    chunk = [NewMemory(memory("c1"), v, [("e1", "subject")], 50.0),
             NewMemory(memory("c2"), v, (), None, idem),
             NewMemory(memory("c3", metadata=None), None, [("e2", None), ("e3", "object")], 60.0)]
    store.insert_memories(chunk)
    assert [strip(store.get_memory("t1", m.row["id"])) for m in chunk] == [m.row for m in chunk]
    assert store.get_memory("t1", "c3")["embedding"] is None
    rowids, sims = store.ranked_by_similarity("t1", v, 0.99)  # c1 and c2 tie: in order
    assert [store.rows_by_rowids(rowids.tolist())[r]["id"] for r in rowids.tolist()] \
        == ["c1", "c2"]
    assert {k: sorted(x["entity_id"] for x in ls)
            for k, ls in store.entity_links_of(["c1", "c2", "c3"]).items()} \
        == {"c1": ["e1"], "c3": ["e2", "e3"]}
    assert store.due_jobs(100.0) == [("c1", "t1"), ("c3", "t1")]
    assert not store.detection_pending("c2")
    assert store.get_idempotency("t1", "idem-c") == idem
    # a chunk with a row that cannot be stored (an id already taken) stores none of its rows
    with pytest.raises(Exception):  # noqa: B017 - each driver names its integrity error
        store.insert_memories([NewMemory(memory("c4"), v, [("e4", None)], 70.0),
                               NewMemory(memory("c1"), v)])
    assert store.get_memory("t1", "c4") is None and store.entity_links_of(["c4"]) == {}
    assert store.due_jobs(100.0) == [("c1", "t1"), ("c3", "t1")]
    store.insert_memories([])  # nothing to do


def test_client_request_and_rowids(store: Storage) -> None:
    store.insert_many([memory("m1", client_request_id="req-1"), memory("m2")],
                      [unit(np.random.default_rng(i)) for i in range(2)])
    assert store.find_client_request("t1", "req-1") == "m1"
    assert store.find_client_request("t2", "req-1") is None
    assert store.find_client_requests("t1", ["req-1", "req-2", "req-1"]) == {"req-1": "m1"}
    assert store.find_client_requests("t2", ["req-1"]) == {}
    assert store.find_client_requests("t1", []) == {}
    m1 = store.get_memory("t1", "m1")
    assert store.rows_by_rowids([m1["_rowid"]])[m1["_rowid"]]["id"] == "m1"
    assert store.rows_by_rowids([]) == {}


def test_list_filters_sort_and_cursor(store: Storage) -> None:
    rows = [memory(f"r{i}", created_at=f"2026-01-0{i + 1}T00:00:00.000000+00:00",
                   fleet_id="f1" if i % 2 else "f2", weight=i / 10,
                   expires_at=None if i % 3 else f"2027-01-0{i + 1}T00:00:00+00:00",
                   memory_type="episode" if i == 4 else "fact")
            for i in range(6)]
    rows[5]["deleted_at"] = "2026-02-01T00:00:00.000000+00:00"
    store.insert_many(rows, [unit(np.random.default_rng(i)) for i in range(6)])
    ids = lambda **kw: [r["id"] for r in store.iter_memories(ListFilter("t1", **kw))]  # noqa: E731
    assert ids() == ["r4", "r3", "r2", "r1", "r0"]
    assert ids(include_deleted=True)[0] == "r5"
    assert ids(fleet_id="f1") == ["r3", "r1"]
    assert ids(exclude_memory_types=["episode"]) == ["r3", "r2", "r1", "r0"]
    assert ids(sort="weight", order="asc") == ["r0", "r1", "r2", "r3", "r4"]
    # NULLs first ascending, last descending, on both backends
    assert ids(sort="expires_at", order="asc") == ["r1", "r2", "r4", "r0", "r3"]
    assert ids(sort="expires_at", order="desc") == ["r3", "r0", "r4", "r2", "r1"]
    assert ids(after=(rows[3]["created_at"], "r3")) == ["r2", "r1", "r0"]
    assert ids(created_after=rows[1]["created_at"], created_before=rows[4]["created_at"]) == [
        "r3", "r2"]
    chunked = [r["id"] for r in store.iter_memories(ListFilter("t1"), chunk=2)]
    assert chunked == ["r4", "r3", "r2", "r1", "r0"]


def test_updates_status_delete_reassign(store: Storage) -> None:
    rng = np.random.default_rng(9)
    store.insert_many([memory("m1", visibility="scope_agent"), memory("m2")],
                      [unit(rng), unit(rng)])
    row = store.get_memory("t1", "m1")
    new_vector = unit(rng)
    store.update_memory(row, {"content": "changed content", "metadata": {"v": 2}}, new_vector,
                        [("e9", "object")])
    got = store.get_memory("t1", "m1")
    assert got["content"] == "changed content" and got["metadata"] == {"v": 2}
    assert store.entity_links_of(["m1"]) == {"m1": [{"entity_id": "e9", "role": "object"}]}
    top, sim = next(iter(store.similar_rows("t1", new_vector, 0.0)))
    assert top["id"] == "m1" and sim == pytest.approx(1.0, abs=1e-5)
    store.update_memory(got, {}, None, [])
    assert store.entity_links_of(["m1"]) == {}
    store.update_status("t1", "m2", "pending")
    assert store.get_memory("t1", "m2")["status"] == "pending"
    store.reassign("t1", ["m1", "m2"], "a7")
    m1, m2 = store.get_memory("t1", "m1"), store.get_memory("t1", "m2")
    assert (m1["agent_id"], m1["visibility"]) == ("a7", "scope_team")  # promoted
    assert (m2["agent_id"], m2["visibility"]) == ("a7", "scope_team")
    store.soft_delete("t1", "m2")
    m2 = store.get_memory("t1", "m2")
    assert m2["status"] == "deleted" and m2["deleted_at"] is not None


def test_detection_rdf_candidates_and_supersession(store: Storage) -> None:
    rng = np.random.default_rng(11)
    triple = {"subject_entity_id": "s1", "predicate": "Region", "object_value": "eu"}
    rows = [memory("old", **triple),
            memory("new", **{**triple, "predicate": "region", "object_value": "us"}),
            memory("same", **triple),  # same object: no contradiction
            memory("other-fleet", **{**triple, "object_value": "ap"}, fleet_id="f2"),
            memory("gone", **{**triple, "object_value": "sa"},
                   deleted_at="2026-02-01T00:00:00+00:00"),
            memory("stale", **{**triple, "object_value": "af"}, status="outdated")]
    store.insert_many(rows, [unit(rng) for _ in rows])
    new = store.get_memory("t1", "new")
    assert sorted(r["id"] for r in store.rdf_candidates(new)) == ["old", "same"]
    store.insert_memory(memory("job", content="job row"), unit(rng), (), 1.0)
    store.complete_detection("job", [("new", "old")])
    assert store.get_memory("t1", "old")["status"] == "outdated"
    assert store.get_memory("t1", "new")["supersedes_id"] == "old"
    assert [r["id"] for r in store.successors_of("t1", ["old"])] == ["new"]
    assert not store.detection_pending("job") and store.next_due_at() is None


def test_entities(store: Storage) -> None:
    entity = {"id": "e1", "tenant_id": "t1", "fleet_id": None, "entity_type": "service",
              "canonical_name": "ledger", "attributes": {"tier": 1},
              "created_at": "2026-01-01T00:00:00+00:00"}
    store.save_entity(entity)
    store.save_entity({**entity, "attributes": {"tier": 2}})  # upsert
    assert store.find_entity("t1", "service", "ledger", None)["attributes"] == {"tier": 2}
    assert store.find_entity("t1", "service", "ledger", "f1") is None
    assert store.get_entity("t1", "e1")["canonical_name"] == "ledger"
    assert store.get_entity("t2", "e1") is None
    rng = np.random.default_rng(2)
    store.insert_memory(memory("a", created_at="2026-01-01T00:00:01+00:00"), unit(rng),
                        [("e1", "subject")])
    store.insert_memory(memory("bb", created_at="2026-01-01T00:00:02+00:00"), unit(rng),
                        [("e1", None)])
    store.insert_memory(memory("ccc", deleted_at="2026-01-02T00:00:00+00:00"), unit(rng),
                        [("e1", None)])
    assert [r["id"] for r in store.memories_linked_to("t1", "e1")] == ["bb", "a"]
    assert list(store.memories_linked_to("t2", "e1")) == []


def test_a_hub_entity_yields_every_linked_row_newest_first(store: Storage) -> None:
    """The SQLite store reads linked rows in pages; past a page boundary nothing is lost,
    repeated or reordered (ties in created_at broken by id on both backends)."""
    rng = np.random.default_rng(3)
    expected = []
    for i in range(150):
        created = f"2026-01-01T00:{i // 2 // 60:02d}:{i // 2 % 60:02d}+00:00"  # pairs tie
        store.insert_memory(memory(f"m{i:03d}", created_at=created,
                                   metadata={"i": i}), unit(rng), [("hub", None)])
        expected.append((created, f"m{i:03d}"))
    expected.sort(reverse=True)
    rows = list(store.memories_linked_to("t1", "hub"))
    assert [r["id"] for r in rows] == [memory_id for _, memory_id in expected]
    assert rows[0]["metadata"] == {"i": int(rows[0]["id"][1:])}


def test_linked_rows_under_a_filter_are_the_admitted_ones_in_order(store: Storage) -> None:
    """The graph walk hands its scope filter to the store: for every enumerated principal,
    the filtered linked rows are exactly the unfiltered ones the Python rule admits, in the
    same newest-first order (a hub of rows the caller may not read yields none)."""
    rng = np.random.default_rng(17)
    for row in ROWS:
        store.insert_memory(dict(row), unit(rng), [("hub", None)])
    everything = list(store.memories_linked_to("t1", "hub"))
    assert len(everything) == sum(1 for r in ROWS if r["deleted_at"] is None)
    for flt in FILTERS:
        got = [r["id"] for r in store.memories_linked_to("t1", "hub", flt)]
        assert got == [r["id"] for r in everything if flt.admits(r)], flt


def test_the_detector_gives_the_loop_a_turn_between_jobs(store: Storage) -> None:
    """A bulk leaves many contradiction jobs due at once (up to 50 are taken together): the
    detector, a task on the server's event loop, lets other requests in between two jobs
    rather than after the batch (on PostgreSQL each job is a commit: fifty of them held every
    other tenant's request for the lot)."""
    import asyncio

    from reference_server.pipeline.contradiction import ContradictionDetector

    store.insert_memories([NewMemory(memory(f"job{i}"), detection_due_at=0.0)
                           for i in range(3)])
    events: list[str] = []
    complete = store.complete_detection

    def recorded(memory_id: str, pairs: list) -> None:
        complete(memory_id, pairs)
        events.append("job")

    store.complete_detection = recorded  # type: ignore[method-assign]

    async def main() -> None:
        detector = ContradictionDetector(store)
        detector.start()
        while events.count("job") < 3:
            events.append("turn")  # another request's turn of the loop
            await asyncio.sleep(0)
        await detector.stop()

    asyncio.run(main())
    jobs = [i for i, e in enumerate(events) if e == "job"]
    assert len(jobs) == 3 and store.due_jobs(1e12) == []
    assert all("turn" in events[a:b] for a, b in itertools.pairwise(jobs)), events


# --- scale: the exact search's index and its cosine gate (issue 26) --------------------------

def test_rows_exactly_at_the_cosine_gate_are_returned(store: Storage) -> None:
    """A row whose cosine equals the gate is returned, for any row. PostgreSQL finds the
    gate's candidates by half-precision cosines (off by up to ~1e-3), so without a margin
    about half of these rows would be dropped by the prefilter."""
    rng = np.random.default_rng(11)
    rows = [memory(f"g{i:03d}", fleet_id=f"f{i % 3}") for i in range(120)]
    store.insert_many(rows, [unit(rng) for _ in rows])
    query = unit(rng)
    flt = SearchFilter(get_profile("memclaw-2026-05-30"),
                       SearchScope(Viewer(None), frozenset(["f1"]), None, None, None))
    ranked = list(store.similar_rows("t1", query, -2.0, flt))
    assert len(ranked) == 40
    for row, sim in ranked[::3]:
        got = [r["id"] for r, _ in store.similar_rows("t1", query, sim, flt)]
        assert row["id"] in got and got == [r["id"] for r, s in ranked if s >= sim]


def _plan(store: Storage, sql: str, args: tuple) -> str:
    rows = store._all("EXPLAIN (ANALYZE, COSTS OFF) " + sql, args)  # type: ignore[attr-defined]
    return "\n".join(r["QUERY PLAN"] for r in rows)


def _exact_ids(store: Storage, query: np.ndarray, gate: float, flt: SearchFilter) -> list[str]:
    """The rows `flt` admits at or above the gate, most similar first (ties in insertion
    order), by numpy over every stored vector (read back through the store)."""
    rows = {r["id"]: r["_rowid"] for r in store.iter_memories(ListFilter("t1"))
            if flt.admits(r)}
    sims = {i: float(np.frombuffer(store.get_memory("t1", i)["embedding"],
                                   dtype=np.float32) @ query) for i in rows}
    return sorted((i for i, s in sims.items() if s >= gate), key=lambda i: (-sims[i], rows[i]))


@pytest.mark.parametrize("vector_search", ["exact", "hnsw"])
def test_postgres_search_follows_another_server_on_the_database(
        backend: str, open_store: Callable[..., Storage], vector_search: str) -> None:
    """PostgreSQL ranks the blocks a search reads in the server's memory: a store that has
    searched, and so holds its blocks, still finds what another store (another server
    process on the same database) wrote since: new rows, a re-embedded row, a row turned
    org-visible, a row moved to another fleet."""
    if backend != "postgres":
        pytest.skip("PostgreSQL's in-memory blocks and their catch-up")
    reader, writer = open_store(vector_search), open_store()
    rng = np.random.default_rng(23)
    rows = [memory(f"w{i:03d}", fleet_id=("f1", "f2", None)[i % 3]) for i in range(60)]
    writer.insert_many(rows, [unit(rng) for _ in rows])
    query = unit(rng)
    flt = SearchFilter(get_profile("memclaw-2026-05-30"),
                       SearchScope(Viewer(None), frozenset(["f1"]), None, None, None))

    def found() -> list[str]:
        return [r["id"] for r, _ in reader.similar_rows("t1", query, 0.1, flt)]

    assert found() == _exact_ids(writer, query, 0.1, flt)
    near = (query + 0.3 * unit(rng)) / np.linalg.norm(query + 0.3 * unit(rng))
    writer.insert_memory(memory("new-f1", fleet_id="f1"), near.astype(np.float32))
    writer.insert_memory(memory("new-f2", fleet_id="f2"), query)  # out of scope
    writer.update_memory(writer.get_memory("t1", "w000"), {"content": "moved"}, query, None)
    writer.update_memory(writer.get_memory("t1", "w001"), {"visibility": "scope_org"},
                         query, None)  # f2 -> org-visible: now in scope
    writer.update_memory(writer.get_memory("t1", "w003"), {"fleet_id": "f2"}, None, None)
    got = found()
    assert got == _exact_ids(writer, query, 0.1, flt)
    assert {"new-f1", "w000", "w001"} <= set(got) and not {"new-f2", "w003"} & set(got)


def test_postgres_search_finds_a_row_whose_transaction_commits_late(
        backend: str, open_store: Callable[..., Storage]) -> None:
    """A row written by a transaction that began before another writer's but commits after a
    search has seen that later writer's row is still found once committed: the catch-up
    starts from the oldest transaction then open, not from the newest row it has seen."""
    if backend != "postgres":
        pytest.skip("PostgreSQL's catch-up")
    import psycopg
    from pgvector.psycopg import register_vector

    reader, writer = open_store(), open_store()
    rng = np.random.default_rng(29)
    writer.insert_many([memory("base", fleet_id="f1")], [unit(rng)])
    query = unit(rng)
    flt = SearchFilter(get_profile("memclaw-2026-05-30"),
                       SearchScope(Viewer(None), frozenset(["f1"]), None, None, None))
    list(reader.similar_rows("t1", query, -2.0, flt))  # blocks loaded, catch-up mark taken
    with psycopg.connect(writer.url) as slow:  # type: ignore[attr-defined]
        register_vector(slow)
        slow.execute("INSERT INTO memories (id, tenant_id, fleet_id, agent_id, memory_type, "
                      "content, content_hash, created_at, embedding) VALUES ('late', 't1', "
                      "'f1', 'a1', 'fact', 'late', 'h-late', '2026-01-01', %s)", (query,))
        writer.insert_memory(memory("early", fleet_id="f1"), query)  # a later xid, committed
        assert {r["id"] for r, _ in reader.similar_rows("t1", query, 0.99, flt)} == {"early"}
        slow.commit()
    assert {r["id"] for r, _ in reader.similar_rows("t1", query, 0.99, flt)} == {"early",
                                                                                 "late"}


def test_postgres_keeps_an_hnsw_index_only_for_hnsw_search(
        backend: str, open_store: Callable[..., Storage]) -> None:
    """An exact store maintains no HNSW graph (every write would pay for it); a store opened
    for `hnsw` builds it, and a later bulk seed rebuilds it rather than dropping it."""
    if backend != "postgres":
        pytest.skip("PostgreSQL's indexes")
    exact = open_store()
    rng = np.random.default_rng(19)

    def indexes() -> set[str]:
        return {r["indexname"] for r in exact._all(  # type: ignore[attr-defined]
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")}

    rows = [memory(f"b{i:05d}", fleet_id=f"f{i % 4}") for i in range(5_000)]  # a rebuild
    exact.insert_many(rows, [unit(rng) for _ in rows])
    assert "ix_memories_block" in indexes() and "ix_memories_embedding" not in indexes()
    open_store("hnsw")
    assert "ix_memories_embedding" in indexes()
    more = [memory(f"c{i:05d}", fleet_id="f1") for i in range(5_000)]
    exact.insert_many(more, [unit(rng) for _ in more])
    assert {"ix_memories_block", "ix_memories_embedding"} <= indexes()
    query = unit(rng)
    got = [r["id"] for r, _ in exact.similar_rows("t1", query, 0.5)]
    vectors = {r["id"]: v for r, v in zip(rows + more, [exact.get_memory("t1", r["id"])
                                                       for r in rows + more], strict=True)}
    sims = {i: float(np.frombuffer(v["embedding"], dtype=np.float32) @ query)
            for i, v in vectors.items()}
    assert got == sorted((i for i, s in sims.items() if s >= 0.5), key=lambda i: -sims[i])


def test_postgres_large_seed_rebuilds_every_secondary_index_as_it_was(
        backend: str, store: Storage) -> None:
    """A large seed (as many rows as a quarter of the table, at least 5,000) drops the
    table's secondary indexes, copies and builds each again after the copy (a sorted build,
    not a million scattered inserts): afterwards the same indexes exist with the same
    definitions, as new relations; a small seed onto a large table keeps them as they were."""
    if backend != "postgres":
        pytest.skip("PostgreSQL's indexes")
    rng = np.random.default_rng(31)

    def indexes() -> dict[str, tuple[int, str]]:
        return {r["relname"]: (r["oid"], r["def"]) for r in store._all(  # type: ignore[attr-defined]
            "SELECT c.relname, c.oid, pg_get_indexdef(c.oid) AS def FROM pg_index x "
            "JOIN pg_class c ON c.oid = x.indexrelid WHERE x.indrelid = 'memories'::regclass")}

    store.insert_many([memory("first")], [unit(rng)])
    before = indexes()
    rows = [memory(f"s{i:05d}", fleet_id=f"f{i % 3}") for i in range(5_000)]
    store.insert_many(rows, [unit(rng) for _ in rows])
    after = indexes()
    assert {k: d for k, (_, d) in after.items()} == {k: d for k, (_, d) in before.items()}
    keys = {"memories_pkey", "memories_rowid_key"}
    assert all(after[k][0] == before[k][0] for k in keys)
    assert all(after[k][0] != before[k][0] for k in set(before) - keys)
    assert len(set(before) - keys) >= 7
    few = [memory(f"t{i:05d}") for i in range(2_000)]
    store.insert_many(few, [unit(rng) for _ in few])
    assert indexes() == after
    assert [r["id"] for r, _ in store.similar_rows("t1", unit(rng), -2.0)][:1]


def test_postgres_one_tenants_block_load_holds_no_other_tenants_search(
        backend: str, store: Storage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks are loaded under the tenant's own lock: while one tenant's first search is
    still loading (at 1M rows, seconds), another tenant's search is answered."""
    if backend != "postgres":
        pytest.skip("PostgreSQL's per-tenant block locks")
    import threading

    rng = np.random.default_rng(37)
    store.insert_many([memory("a1"), memory("b1", tenant="t2")], [unit(rng), unit(rng)])
    loading, release = threading.Event(), threading.Event()
    real = store.blocks._load_units  # type: ignore[attr-defined]

    def slow_for_t1(conn: object, tenant_id: str, units: object) -> None:
        if tenant_id == "t1":
            loading.set()
            assert release.wait(30)
        real(conn, tenant_id, units)

    monkeypatch.setattr(store.blocks, "_load_units", slow_for_t1)  # type: ignore[attr-defined]
    first = threading.Thread(target=lambda: list(store.similar_rows("t1", unit(rng), -2.0)))
    first.start()
    other: list[str] = []
    second = threading.Thread(target=lambda: other.extend(
        r["id"] for r, _ in store.similar_rows("t2", unit(rng), -2.0)))
    try:
        assert loading.wait(30)
        second.start()
        second.join(10)  # t1's load is still held: t2 must not wait for it
        assert not second.is_alive() and other == ["b1"]
    finally:
        release.set()
        first.join(30)
        second.join(30)
