"""The engine of the paper's day, MemClaw v2.11.0, at the two commits around the measurement
(docs/engine.md): e2d805e (2026-05-28, what the paper measured) and 045039f (2026-05-30, the
remediation). Neither commit has a uv.lock: the kit resolves each service's pyproject.toml as
PyPI stood at the commit's time and starts the services as their Dockerfiles' CMD says.

Both instances run side by side (one per commit); each answers a small leakage run, and the
paper's Table 3 gap (an agent at trust 1 reading another fleet's row by id) is open on
e2d805e and closed on 045039f: the remediation, on real code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetprobe.engine.build import cache_root

from .conftest import archive, check_leakage, fleetprobe, leakage_run

# Two cold builds (each resolving as of its commit's time) and two engines: about 5 minutes
# on an idle 2-core machine, 23 at load 15 (2026-12-04); the limit catches a hang only.
pytestmark = [pytest.mark.engine, pytest.mark.timeout(2400)]

# commit -> what a trust-1 agent gets reading another fleet's row by id (Table 3)
COMMITS = {"e2d805e": 200, "045039f": 404}


def cross_fleet_reads(run: dict) -> list[int]:
    """Statuses of Table 3's trust-1 agent reading a row of a fleet it is not in."""
    return [e["status"] for e in run["events"]
            if e["phase"] in ("agent_probe", "reprobe") and e["credential"] == "agent"
            and e["trust"] == 1 and e["relation"] == "cross_fleet"]


def test_may_commits_side_by_side_table3_before_and_after(tmp_path: Path) -> None:
    sources = {commit: archive(commit) for commit in COMMITS}
    for src in sources.values():
        fleetprobe("engine", "down", src=src)
    states = {}
    try:
        for commit, src in sources.items():
            states[commit] = json.loads(fleetprobe("engine", "up", "--json", src=src).stdout)
        assert states["e2d805e"]["services"] != states["045039f"]["services"]
        for commit, src in sources.items():
            state = states[commit]
            assert state["version"] == "2.11.0" and state["commit"].startswith(commit)
            # no lock at this commit: resolved as of the commit's own time, pinned in the build
            assert state["resolution"] == {"mode": "resolved",
                                           "exclude_newer": state["committed_at"]}
            build = json.loads((cache_root() / state["commit"][:12] / "build.json").read_text())
            assert build["dependencies"] == state["dependencies"]
            pins = (cache_root() / state["commit"][:12] / "venv"
                    / "core-api.requirements.txt").read_text()
            assert f"fastapi=={state['dependencies']['core-api']['fastapi']}" in pins

            run = leakage_run(tmp_path / commit, src)
            check_leakage(run, src, shared=True)
            reads = cross_fleet_reads(run)
            assert reads and set(reads) == {COMMITS[commit]}, (commit, reads)
    finally:
        for src in sources.values():
            fleetprobe("engine", "down", src=src)
