"""Completeness of governed retrieval: recall of each store's scoped similarity search against
exact ranking over the rows the caller may read, per store size and index setting.

The search path ranks the first 2 x top_k visible rows (top_k 5 in every experiment's params,
20 for the contradiction stale reads), so a store that misses one of them changes what a probe
sees. For sampled queries of the benchmark's shape (six words of a stored row, one fleet in
scope, 1/8 of the rows readable) this compares `Storage.similar_rows` (the scope predicate
applied by the store) with an exact scan in numpy over every stored vector under the Python
scope rule. Settings: SQLite (exact, in-memory fleet blocks), PostgreSQL `exact` (the same
ranking over the scope's blocks, kept in memory from the table), a PostgreSQL `hnsw` store as
the server runs it (fleet-scoped searches ranked exactly, `walk` no) and the HNSW index walk
itself (`walk` yes: the scope in the SQL) at several `hnsw.ef_search` values (the iterative
scan on). Recall is over the rows a search can return, those at or above the
profile's cosine gate ("gated"); a miss is a readable row the search did not return.

    python benchmarks/bench_recall.py [--sizes 10000 100000] [--million] [--queries 200]
        [--stores sqlite postgres] [--ef 40 100 200 400] [--json FILE]

`--json` writes one row per (store, size, setting): {"store", "n", "mode", "ef_search",
"index_walk", "server_default", "recall_gated_at_10", "recall_gated_at_40", "p50_ms", "gated_rows",
"load"}, the evidence behind the report's scale section.
"""

from __future__ import annotations

import os

# As the server does (launch/cli.py), before numpy loads: one BLAS thread per product, so
# the timings are the server's (multi-threaded mat-vecs crawl on a busy 2-core machine).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seeding import Seeded, seed, store_location  # noqa: E402

from reference_server.governance.profiles import get_profile  # noqa: E402
from reference_server.governance.scope import SearchFilter, SearchScope, Viewer  # noqa: E402
from reference_server.pipeline.embedding import HashingEmbedder  # noqa: E402
from reference_server.storage import Storage, open_storage  # noqa: E402
from reference_server.storage import postgres as storage_pg  # noqa: E402

PROFILE = "memclaw-2026-05-30"
KS = (10, 40)  # 2 x top_k for top_k 5 (leakage, propagation) and 20 (stale reads)
DIM = 384


def settings(store: str, efs: list[int]) -> Iterator[tuple[str, int | None, bool]]:
    """(mode, ef_search, index walk for scoped searches) of each setting measured."""
    yield "exact", None, False
    if store == "sqlite":
        return
    yield "hnsw", storage_pg.EF_SEARCH, False
    for ef in efs:
        yield "hnsw", ef, True


def is_server_default(store: str, mode: str, ef: int | None) -> bool:
    if store == "sqlite":
        return True
    return mode == storage_pg.DEFAULT_VECTOR_SEARCH and (
        mode == "exact" or ef == storage_pg.EF_SEARCH)


SCOPE_COLUMNS = ("id", "fleet_id", "agent_id", "visibility", "status", "deleted_at",
                 "memory_type", "ts_valid_start")


def stored_rows(store: Storage, tenant_id: str) -> tuple[list[dict], np.ndarray]:
    """Every row of the tenant (the columns the scope rule reads), in rowid order, and its
    vectors: read straight from the store's database (a benchmark may; the server never)."""
    mark = "?" if store.__class__.__name__ == "SqliteStorage" else "%s"
    got = store._all(f"SELECT {', '.join(SCOPE_COLUMNS)}, embedding FROM memories "  # type: ignore[attr-defined]
                     f"WHERE tenant_id = {mark} ORDER BY rowid", (tenant_id,))
    vectors = np.zeros((len(got), DIM), dtype=np.float32)
    rows = []
    for i, r in enumerate(got):
        emb = r["embedding"]
        vectors[i] = (np.frombuffer(emb, dtype=np.float32) if isinstance(emb, bytes)
                      else emb.to_numpy())
        rows.append({c: r[c] for c in SCOPE_COLUMNS})
    return rows, vectors


def measure(store: Storage, seeded: Seeded, rows: list[dict], vectors: np.ndarray,
            queries: list[dict]) -> dict:
    """Recall@k (gated) and the p50 time of the store's scoped search over `queries`."""
    profile = get_profile(PROFILE)
    embedder = HashingEmbedder(DIM)
    gate = profile.min_similarity
    ids = np.array([r["id"] for r in rows])
    readable: dict[str, np.ndarray] = {}
    hits = dict.fromkeys(KS, 0)
    wanted = dict.fromkeys(KS, 0)
    times = []
    for q in queries:
        vector = embedder.embed(" ".join(q["content"].split()[:6]))
        visible = SearchFilter(profile, SearchScope(Viewer(None), frozenset([q["fleet_id"]]),
                                                    None, None, None))
        if q["fleet_id"] not in readable:
            readable[q["fleet_id"]] = np.array([visible.admits(r) for r in rows])
        sims = np.where(readable[q["fleet_id"]], vectors @ vector, -np.inf)
        order = np.argsort(-sims, kind="stable")[:max(KS)]
        exact = [ids[i] for i in order if sims[i] >= gate]
        start = time.perf_counter()
        got = []
        for r, _ in store.similar_rows(seeded.tenant_id, vector, gate, visible):
            got.append(r["id"])
            if len(got) == max(KS):
                break
        times.append((time.perf_counter() - start) * 1000)
        for k in KS:
            hits[k] += len(set(got[:k]) & set(exact[:k]))
            wanted[k] += len(exact[:k])
    out = {f"recall_gated_at_{k}": hits[k] / wanted[k] if wanted[k] else None for k in KS}
    return {**out, "p50_ms": float(np.percentile(times, 50)), "gated_rows": wanted[max(KS)]}


def run_size(store_kind: str, n: int, args: argparse.Namespace) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory(prefix="recall-") as tmp, \
            store_location(store_kind, Path(tmp)) as db:
        start = time.perf_counter()
        seeded = seed(db, PROFILE, n, random.Random(args.seed))
        seed_s = time.perf_counter() - start
        rng = random.Random(args.seed + 2)
        queries = [rng.choice(seeded.rows) for _ in range(args.queries)]
        for mode, ef, walk in settings(store_kind, args.ef):
            store = open_storage(db, DIM, mode)
            try:
                if ef is not None:
                    store.tune(**{"hnsw.ef_search": ef})  # type: ignore[attr-defined]
                    store.scoped_by_index = walk  # type: ignore[attr-defined]
                if not out:
                    rows, vectors = stored_rows(store, seeded.tenant_id)
                row = {"store": store_kind, "n": n, "mode": mode, "ef_search": ef,
                       "index_walk": walk,
                       "server_default": is_server_default(store_kind, mode, ef),
                       **measure(store, seeded, rows, vectors, queries),
                       "load": os.getloadavg()[0], "seed_s": seed_s}
            finally:
                store.close()
            out.append(row)
            print(f"{store_kind:>8} {n:>9,} {mode:>6} {ef or '-':>5} {'yes' if walk else 'no':>4} "
                  f"{'*' if row['server_default'] else ' '} "
                  f"{row['recall_gated_at_10']:>8.4f} {row['recall_gated_at_40']:>8.4f} "
                  f"{row['p50_ms']:>8.2f} {row['gated_rows']:>7} {row['load']:>5.1f}",
                  flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="also measure at 1M memories")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"],
                        choices=["sqlite", "postgres"])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef", type=int, nargs="*", default=[40, 100, 200, 400],
                        help="HNSW ef_search values (none: exact settings only)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    sizes = args.sizes + ([1_000_000] if args.million else [])
    print(f"scoped recall@k vs exact over readable rows; fleet-scoped queries, cosine gate "
          f"{get_profile(PROFILE).min_similarity}; HNSW m 16, ef_construction 64, iterative "
          f"scan {storage_pg.ITERATIVE_SCAN}; * = the server's default; cores {os.cpu_count()}")
    print(f"{'store':>8} {'n':>9} {'mode':>6} {'ef':>5} {'walk':>4}   {'gated@10':>8} "
          f"{'gated@40':>8} {'p50 ms':>8} {'gated':>7} {'load':>5}")
    results: list[dict] = []
    for n in sizes:
        for store_kind in args.stores:
            results += run_size(store_kind, n, args)
            if args.json:  # written as it goes: a long run keeps what it measured
                args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
