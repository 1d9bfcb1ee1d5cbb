"""Contradiction end to end at smoke scale against the real reference server, per profile.

Each run starts its own server from `params/smoke/contradiction.yaml` (raised rate limits),
exactly as the CLI and the notebook do; runs are cached per module so each is made once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetprobe import load_params, run_experiment

from .traces import KEY_LIKE, REPO, events, manifest

SMOKE = REPO / "params/smoke/contradiction.yaml"

Run = Callable[..., Path]




@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """`run(profile, *overrides, tag=...)`: one smoke run per distinct argument list."""
    cache: dict[tuple[str, ...], Path] = {}
    root = tmp_path_factory.mktemp("contradiction-traces")

    def make(profile: str, *overrides: str, tag: str = "") -> Path:
        key = (profile, tag, *overrides)
        if key not in cache:
            params = load_params(SMOKE, [f"traces_root={root}", f"target.profile={profile}",
                                         *overrides])
            cache[key] = run_experiment("contradiction", params)
        return cache[key]

    return make


def test_measured_profile_detects_every_run_whose_writes_were_both_admitted(run: Run) -> None:
    run_dir = run("memclaw-2026-05-30")
    checks = events(run_dir, "check")
    both = [c for c in checks if c["both_admitted"]]
    assert both, "no fact-run had both writes admitted"
    assert all(c["detected"] for c in both)
    # detection was read off the re-fetch: the newer row names the older one
    refetch = {r["memory_id"]: r for r in events(run_dir, "refetch")}
    for check in both:
        newer = refetch[check["triggered_memory_id"]]
        assert newer["observed_supersedes_id"] in refetch
        assert refetch[newer["observed_supersedes_id"]]["observed_status"] == "outdated"
    m = manifest(run_dir)
    assert m["complete"] is True and m["incomplete_reason"] is None
    assert m["planned"] == {"entity": 6, "write": 24, "check": 12, "stale_read": 12}
    admitted = sum(1 for w in events(run_dir, "write") if w["admitted"])
    assert m["executed"] == m["planned"] | {"refetch": admitted}


def test_low_prose_diversity_meets_exact_duplicate_409s_recorded_with_their_reason(
    run: Run,
) -> None:
    writes = events(run("memclaw-2026-05-30"), "write")
    rejected = [w for w in writes if not w["admitted"]]
    assert rejected and {w["reject_reason"] for w in rejected} == {"exact_duplicate"}
    assert all(w["status"] == 409 and "Duplicate memory exists" in w["error"] for w in rejected)
    # the repeated sentences are the concurrent pair's: both of its writes, evenly
    assert {(w["scenario"], w["write_index"]) for w in rejected} == {
        ("concurrent", 0), ("concurrent", 1)}
    assert {w["prose_diversity"] for w in writes} == {"low"}


def test_repeated_sentences_from_another_agent_meet_the_near_duplicate_gate(run: Run) -> None:
    """Exact-duplicate scope is per agent, the near-duplicate gate is across agents: the paper's
    "dominated by exact-content duplicates" fits one writer per fact, not one per scenario."""
    writes = events(run("memclaw-2026-05-30", "writer_assignment=per_scenario"), "write")
    rejected = [w for w in writes if not w["admitted"]]
    assert rejected and {w["reject_reason"] for w in rejected} == {"near_duplicate"}
    assert {w["scenario"] for w in rejected} == {"concurrent"}


def test_high_prose_diversity_admits_every_write(run: Run) -> None:
    run_dir = run("memclaw-2026-05-30", "prose_diversity=high")
    assert all(w["admitted"] for w in events(run_dir, "write"))
    assert all(c["both_admitted"] and c["detected"] for c in events(run_dir, "check"))


def test_remediated_profile_detects_like_the_measured_one(run: Run) -> None:
    checks = events(run("memclaw-2026-05-31"), "check")
    both = [c for c in checks if c["both_admitted"]]
    assert both and all(c["detected"] for c in both)


VALUE_ONLY = ("prose_diversity=high", "pair_prose=value_only")


def test_near_duplicate_contradiction_is_refused_as_measured(run: Run) -> None:
    """Paper 9.2: the synchronous gate 409s 'X is B' after 'X is A' before detection."""
    run_dir = run("memclaw-2026-05-30", *VALUE_ONLY)
    sequential = [w for w in events(run_dir, "write") if w["scenario"] == "sequential"]
    assert all(w["admitted"] for w in sequential if w["write_index"] == 0)
    second = [w for w in sequential if w["write_index"] == 1]
    assert second and all(w["reject_reason"] == "near_duplicate" for w in second)
    assert all("Near-duplicate memory exists" in w["error"] for w in second)
    runs = [c for c in events(run_dir, "check") if c["scenario"] == "sequential"]
    assert not any(c["both_admitted"] for c in runs)


def test_near_duplicate_contradiction_is_admitted_and_detected_as_proposed(run: Run) -> None:
    run_dir = run("proposed", *VALUE_ONLY)
    assert all(w["admitted"] for w in events(run_dir, "write"))
    checks = events(run_dir, "check")
    assert checks and all(c["both_admitted"] and c["detected"] for c in checks)


def test_naive_store_supersedes_nothing_and_serves_both_rows(run: Run) -> None:
    run_dir = run("naive")
    assert all(w["admitted"] for w in events(run_dir, "write"))  # no dedup either
    refetches = events(run_dir, "refetch")
    assert refetches and all(r["observed_status"] == "active"
                             and r["observed_supersedes_id"] is None for r in refetches)
    assert not any(c["detected"] for c in events(run_dir, "check"))
    stale = events(run_dir, "stale_read")
    assert stale and all(s["active_rows"] == 2 and s["stale"] for s in stale)


def test_governed_profile_serves_at_most_one_active_row_per_run(run: Run) -> None:
    stale = events(run("memclaw-2026-05-30"), "stale_read")
    assert stale and all(s["status"] == 200 and s["active_rows"] <= 1 for s in stale)
    assert not any(s["stale"] for s in stale)


def test_same_seed_same_plan_fresh_nonce(run: Run) -> None:
    first, second = run("memclaw-2026-05-30"), run("memclaw-2026-05-30", tag="again")

    def planned(run_dir: Path) -> list[tuple[Any, ...]]:
        return sorted((w["fact_id"], w["scenario"], w["write_index"], w["template_id"],
                       w["predicate"], w["object_value"]) for w in events(run_dir, "write"))

    assert planned(first) == planned(second)
    assert manifest(first)["nonce"] != manifest(second)["nonce"]


def test_traces_hold_no_key(run: Run) -> None:
    run_dir = run("memclaw-2026-05-30")
    for path in run_dir.iterdir():
        assert not KEY_LIKE.search(path.read_text()), f"{path.name} holds something key-shaped"



def test_each_fact_is_read_only_after_its_own_settle_window(run: Run) -> None:
    """The schedule the recorded history shows: a fact's stale reads come `settle_s` after its
    last write (while later facts may still be writing), and the re-fetch after every read."""
    from datetime import datetime

    run_dir = run("memclaw-2026-05-30")
    settle_s = manifest(run_dir)["params"]["settle_s"]

    def at(event: dict[str, Any]) -> float:
        return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()

    last_write: dict[str, float] = {}
    for w in events(run_dir, "write"):
        last_write[w["fact_id"]] = max(last_write.get(w["fact_id"], 0.0), at(w))
    reads = events(run_dir, "stale_read")
    assert len(reads) == 2 * len(last_write)
    for r in reads:  # a read's `ts` is when it answered, after it was sent
        assert at(r) - last_write[r["fact_id"]] >= settle_s, r["fact_id"]
    assert min(at(f) for f in events(run_dir, "refetch")) >= max(at(r) for r in reads)
