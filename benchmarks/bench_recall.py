"""Recall of PostgreSQL's HNSW search (`--vector-search hnsw`) against exact search (the
server's default), at the experiments' pool size.

The search path ranks the first 2 x top_k visible rows (top_k 5 in every experiment's params,
20 for the contradiction stale reads), so an approximate index that misses one of them can
change what a probe sees, and so the leakage numbers. For sampled queries of the benchmark's
shape (six words of a stored row, one fleet in scope, 1/8 of the rows visible) this compares
`PostgresStorage.similar_rows` (HNSW + the scope predicate in SQL + iterative scan) with an
exact scan in numpy over every stored vector under the Python scope rule, at several
`hnsw.ef_search` values; the server's setting is `storage/postgres.py` `EF_SEARCH`. Target: recall@k
>= 0.99 for the rows a search can return (at or above the profile's cosine gate: "gated").
"raw" is recall over the exact top k with no gate: with the hashing embedder those are
near-orthogonal rows (cosine ~0.1), where an approximate index's order is noise; shown for
what it is. Also prints each setting's p50 time of the gated query.

    python benchmarks/bench_recall.py [--sizes 10000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seeding import seed, store_location  # noqa: E402

from reference_server.governance.profiles import get_profile  # noqa: E402
from reference_server.governance.scope import SearchFilter, SearchScope, Viewer  # noqa: E402
from reference_server.pipeline.embedding import HashingEmbedder  # noqa: E402
from reference_server.storage import open_storage  # noqa: E402
from reference_server.storage import postgres as storage_pg  # noqa: E402

PROFILE = "memclaw-2026-05-30"
KS = (10, 40)  # 2 x top_k for top_k 5 (leakage, propagation) and 20 (stale reads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ef", type=int, nargs="+", default=[40, storage_pg.EF_SEARCH, 200])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    profile = get_profile(PROFILE)
    print(f"recall@k of HNSW (m 16, ef_construction 64, iterative scan "
          f"{storage_pg.ITERATIVE_SCAN}) vs exact, fleet-scoped queries; server ef_search "
          f"{storage_pg.EF_SEARCH}; cores {os.cpu_count()}", flush=True)
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="recall-") as tmp, \
                store_location("postgres", Path(tmp)) as db:
            seeded = seed(db, PROFILE, n, random.Random(args.seed))
            store = open_storage(db, 384, "hnsw")
            stored = store._all("SELECT id, fleet_id, embedding FROM memories "  # type: ignore[attr-defined]
                                "WHERE tenant_id = %s ORDER BY rowid", (seeded.tenant_id,))
            ids = np.array([r["id"] for r in stored])
            fleets = np.array([r["fleet_id"] for r in stored])
            matrix = np.stack([r["embedding"].to_numpy().astype(np.float32) for r in stored])
            embedder = HashingEmbedder(384)
            rng = random.Random(args.seed + 2)
            queries = [rng.choice(seeded.rows) for _ in range(args.queries)]
            gate = profile.min_similarity
            print(f"\n{n:,} stored memories (load average {os.getloadavg()[0]:.1f}); "
                  f"gated: rows at or above the cosine gate {gate} (what a search can return)")
            print(f"{'ef_search':>9} " + " ".join(f"{f'gated@{k}':>9}" for k in KS)
                  + " " + " ".join(f"{f'raw@{k}':>9}" for k in KS)
                  + f" {'p50 ms':>7} {'gated rows':>10}")
            for ef in args.ef:
                store._db.execute(f"SET hnsw.ef_search = {ef}")  # type: ignore[attr-defined]
                hits = {(g, k): 0 for g in (True, False) for k in KS}
                wanted = {(g, k): 0 for g in (True, False) for k in KS}
                times = []
                for row in queries:
                    vector = embedder.embed(" ".join(row["content"].split()[:6]))
                    scope = SearchScope(Viewer(None), (row["fleet_id"],), None, None, None)
                    visible = SearchFilter(profile, scope)
                    sims = np.where(fleets == row["fleet_id"], matrix @ vector, -np.inf)
                    order = np.argsort(-sims, kind="stable")[:max(KS)]
                    for gated in (True, False):
                        floor = gate if gated else -2.0
                        start = time.perf_counter()
                        got = []
                        for r, _ in store.similar_rows(seeded.tenant_id, vector, floor,
                                                       visible):
                            got.append(r["id"])
                            if len(got) == max(KS):
                                break
                        if gated:
                            times.append((time.perf_counter() - start) * 1000)
                        exact = [ids[i] for i in order if sims[i] >= floor]
                        for k in KS:
                            hits[gated, k] += len(set(got[:k]) & set(exact[:k]))
                            wanted[gated, k] += len(exact[:k])
                cells = [hits[g, k] / wanted[g, k] if wanted[g, k] else float("nan")
                         for g in (True, False) for k in KS]
                print(f"{ef:>9} " + " ".join(f"{c:>9.4f}" for c in cells)
                      + f" {float(np.percentile(times, 50)):>7.2f} {wanted[True, KS[-1]]:>10}",
                      flush=True)
            store.close()


if __name__ == "__main__":
    main()
