"""Propagation end to end at smoke scale against the real reference server, per profile.

Each run starts its own server from `params/smoke/propagation.yaml` (raised rate limits),
exactly as the CLI and the notebook do; runs are cached per module so each is made once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetprobe import load_params, run_experiment

from .traces import KEY_LIKE, REPO, events, manifest

SMOKE = REPO / "params/smoke/propagation.yaml"
GOVERNED = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed")

Run = Callable[..., Path]




@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """`run(profile, *overrides)`: one smoke run per distinct argument list."""
    cache: dict[tuple[str, ...], Path] = {}
    root = tmp_path_factory.mktemp("propagation-traces")

    def make(profile: str, *overrides: str) -> Path:
        key = (profile, *overrides)
        if key not in cache:
            params = load_params(SMOKE, [f"traces_root={root}", f"target.profile={profile}",
                                         *overrides])
            cache[key] = run_experiment("propagation", params)
        return cache[key]

    return make


def by_relation(run_dir: Path, relation: str) -> list[dict[str, Any]]:
    return [p for p in events(run_dir, "probe") if p["reader_relation"] == relation]


@pytest.mark.parametrize("profile", GOVERNED)
def test_governed_profiles_keep_facts_in_the_fleet(run: Run, profile: str) -> None:
    run_dir = run(profile)
    foreign, siblings = by_relation(run_dir, "foreign"), by_relation(run_dir, "sibling")
    assert len(foreign) == 12 and len(siblings) == 18
    assert all(p["status"] == 200 and p["visible"] is False and p["leak"] is False
               for p in foreign)
    assert all(p["poll_count"] == 1 for p in foreign)  # one attempt each
    assert all(p["visible"] and p["leak"] is False for p in siblings)
    assert {p["credential"] for p in siblings + foreign} == {"agent"}
    m = manifest(run_dir)
    assert m["complete"] is True and m["skipped"] == []
    assert m["planned"] == m["executed"] == {
        "reader": 5, "write": 8, "probe": 30, "window": 2, "redistribute": 3}


def test_naive_store_shows_facts_to_foreign_readers(run: Run) -> None:
    foreign = by_relation(run("naive"), "foreign")
    assert foreign and all(p["visible"] and p["leak"] for p in foreign)


@pytest.mark.parametrize("profile", GOVERNED)
def test_window_is_measured_from_write_completion(run: Run, profile: str) -> None:
    windows = events(run(profile), "window")
    assert len(windows) == 2
    for window in windows:
        assert window["visible"] is True and window["poll_count"] >= 1
        # one search round trip at least, well inside the deadline
        assert window["latency_ms"] <= window["time_to_visible_ms"] < 3000


@pytest.mark.parametrize("profile", ["memclaw-2026-05-30", "memclaw-2026-05-31"])
def test_redistribute_below_trust_3_is_403_as_measured(run: Run, profile: str) -> None:
    attempts = events(run(profile), "redistribute")
    assert {a["relation"] for a in attempts} == {"sibling", "cross_fleet"}
    for attempt in attempts:
        assert attempt["status"] == 403 and "trust_level >= 3" in attempt["error"]
        assert attempt["requester_trust"] == 1 and attempt["moved"] is None
        assert attempt["agent_id_after"] == attempt["requester_agent"]
        assert attempt["flipped"] is False


def test_proposed_profile_opens_sibling_redistribute_only(run: Run) -> None:
    attempts = events(run("proposed"), "redistribute")
    sibling = [a for a in attempts if a["relation"] == "sibling"]
    cross = [a for a in attempts if a["relation"] == "cross_fleet"]
    assert len(sibling) == 2 and len(cross) == 1
    assert all(a["status"] == 200 and a["moved"] == 1 and a["flipped"]
               and a["agent_id_after"] == a["target_agent"] for a in sibling)
    assert all(a["status"] == 403 and a["flipped"] is False for a in cross)


def test_tenant_key_readers_are_registered_and_search_without_identity(run: Run) -> None:
    run_dir = run("memclaw-2026-05-30", "reader_credential=tenant")
    readers = events(run_dir, "reader")
    assert len(readers) == 5 and all(r["status"] == 200 and r["credential"] == "tenant"
                                     and r["trust"] is None for r in readers)
    probes = events(run_dir, "probe")
    assert {p["credential"] for p in probes} == {"tenant"}
    assert not any(p["leak"] for p in probes)
    assert all(p["visible"] for p in by_relation(run_dir, "sibling"))
    # the targets exist now, so the 403 is the requester-trust gate, not a missing agent
    assert {a["status"] for a in events(run_dir, "redistribute")} == {403}


def test_traces_hold_no_key(run: Run) -> None:
    run_dir = run("memclaw-2026-05-30")
    assert len(events(run_dir, "reader")) == 5  # five agent keys were provisioned
    for path in run_dir.iterdir():
        assert not KEY_LIKE.search(path.read_text()), f"{path.name} holds something key-shaped"

