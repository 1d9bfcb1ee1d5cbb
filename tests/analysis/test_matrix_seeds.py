"""The matrix's between-seed spread and the `hardened` zero (sections/matrix/seeds.py, metrics.sql
`matrix_seed_runs`, `matrix_seed_cells`, `matrix_seed_totals`), and the matrix's headline seed:
a run on another seed is a repeat, never canonical, and left out of the cross-run tables. Built
from small run directories whose gaps per seed are known."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetprobe.analysis.base import db
from fleetprobe.analysis.base.results import HEADLINE, REPEAT, Results
from fleetprobe.analysis.sections import matrix
from fleetprobe.analysis.sections.matrix import seeds

from .fixtures.builders import write_run

WHO = "t1 other_fleet"


def verdicts(get_gaps: int, search_gaps: int = 1, paper_leaks: int = 0) -> list[dict[str, Any]]:
    """Four GETs (the first `get_gaps` gaps), two searches (`search_gaps` gaps), a GET by
    another principal that is never a gap, and three paper-design searches the paper expects
    denied (`paper_leaks` of them leak) plus one it expects allowed."""
    rows: list[tuple[str, str, str, str]] = [
        *((WHO, "get", "deny", "gap" if i < get_gaps else "ok") for i in range(4)),
        *((WHO, "search", "deny", "gap" if i < search_gaps else "ok") for i in range(2)),
        ("tenant key", "get", "allow", "ok"), ("t0 own", "get", "allow", "n/a"),
        *(("tenant key", "paper_search", "deny", "gap" if i < paper_leaks else "ok")
          for i in range(3)),
        ("tenant key", "paper_search", "allow", "ok"),
    ]
    return [{"phase": "verdict", "probe_id": f"p{i}", "principal": who, "path": path,
             "expected": expected, "verdict": verdict, "cross_tenant": False}
            for i, (who, path, expected, verdict) in enumerate(rows)]


def matrix_run(root: Path, seed: int, events: list[dict[str, Any]], minute: int,
               profile: str = "memclaw-2026-05-30", **params: Any) -> str:
    run_id = f"20261205T0{minute:03d}00Z-matrix-seed{seed}-{profile}"
    write_run(root, run_id, "matrix", events, profile=profile, started_minute=minute,
              params={"fleets": 8, **params}, manifest_extra={"seed": seed,
                                                              "git_commit": f"c{seed:06d}x"})
    return run_id


@pytest.fixture()
def traces(tmp_path: Path) -> Path:
    root = tmp_path / "traces"
    # the headline seed first; the repeats later and larger, so only the seed keeps them out
    matrix_run(root, 11, verdicts(get_gaps=2), 0)
    matrix_run(root, 12, verdicts(get_gaps=1, paper_leaks=1) * 2, 10)
    matrix_run(root, 13, verdicts(get_gaps=0), 20)
    matrix_run(root, 11, verdicts(get_gaps=0, search_gaps=0), 30, profile="hardened")
    matrix_run(root, 14, verdicts(get_gaps=0, search_gaps=0), 40, profile="hardened",
               fleets=5, moved_agents=True)
    return root


@pytest.fixture()
def frames(traces: Path):
    con = db.connect(traces)
    try:
        cells, totals, homes = seeds.load(con)
        canonical = con.execute("SELECT profile, run_id FROM matrix_canonical").fetchall()
        return seeds.spread_frame(cells), seeds.zero_frame(totals, homes), dict(canonical)
    finally:
        con.close()


def test_the_spread_counts_each_seeds_gaps_from_its_run(frames):
    spread = frames[0].set_index("dimension")
    assert set(spread.target) == {"memclaw-2026-05-30"}  # hardened: one seed per world
    get = spread.loc["read by id"]
    # seed 12's run holds every probe twice
    assert get["per seed (seed: gaps/n)"] == "11: 2/5, 12: 2/10, 13: 0/5"
    assert (get["gap on"], get["changes with the seed"]) == ("2/3 seeds", "yes")
    assert get["range"] == "0.0000-0.4000"
    assert get.pooled.startswith("4/20 = 0.200")
    # the one principal x path cell with gaps on some seeds: WHO's GET
    assert get["cells changing class"] == "1/2"
    search = spread.loc["search / recall"]
    assert search["per seed (seed: gaps/n)"] == "11: 1/2, 12: 2/4, 13: 1/2"
    assert (search["changes with the seed"], search["range"]) == ("no", "0.5000-0.5000")
    assert spread.loc["all matrix paths", "per seed (seed: gaps/n)"] == (
        "11: 3/7, 12: 4/14, 13: 1/7")
    # the paper's design: n = the probes the paper expects denied
    assert spread.loc["paper design: search", "per seed (seed: gaps/n)"] == (
        "11: 0/3, 12: 2/6, 13: 0/3")
    assert get["kit commits (seeds)"] == "c000011 (11); c000012 (12); c000013 (13)"  # 7 characters


def test_the_hardened_zero_is_shown_per_seed_and_world_with_n(frames):
    zero = frames[1]
    assert zero[["seed", "gaps/judged", "built on"]].values.tolist() == [
        [11, "0/7", "yes (canonical seed and world)"],
        [14, "0/7", "no: other seed and world"]]
    assert zero.world.tolist() == ["? tenants x 8 fleets, ? random probes",
                                   "? tenants x 5 fleets, ? random probes, moved agents"]
    assert float(zero["95% upper bound"][0]) == pytest.approx(0.35433, abs=1e-4)
    text = seeds.section(frames[0], zero)
    assert "2 run(s), 1 of them on a seed or world other than its canonical run's" in text
    assert "pooled 0/14" in text and "no run has a gap" in text
    # read by id (2, 2, 0 gaps) and the paper design's search (0, 2, 0 leaks)
    assert ("2 change verdict with the seed: memclaw-2026-05-30 (? tenants x 8 fleets, ? "
            "random probes) read by id; memclaw-2026-05-30") in text


def test_matrix_canonical_prefers_the_headline_seed(frames):
    assert frames[2]["memclaw-2026-05-30"].endswith("-matrix-seed11-memclaw-2026-05-30")


def test_other_seeds_are_repeats_never_canonical_nor_compared(traces):
    results = Results.load(traces)
    try:
        runs = results.runs.set_index("seed")
        mine = runs[runs.profile == "memclaw-2026-05-30"]
        assert mine.role.to_dict() == {11: HEADLINE, 12: REPEAT, 13: REPEAT}
        assert results.canonical_run("matrix", "memclaw-2026-05-30").seed == 11
        compared = results.comparison_runs("matrix")
        assert set(compared.seed) == {11}
    finally:
        results.con.close()


def test_matrix_md_carries_the_spread_and_the_zero(traces):
    con = db.connect(traces)
    try:
        section = matrix.write(con)
    finally:
        con.close()
    assert "## Between-seed spread" in section.document
    assert "## The `hardened` profile on other seeds and worlds" in section.document
    assert {seeds.SPREAD, seeds.ZERO} <= set(section.tables)
    # the dimensions the runs judged: read by id, search, all matrix paths, the paper search
    assert len(section.tables[seeds.SPREAD].frame) == 4


def test_a_gap_of_the_hardened_profile_on_another_seed_is_named(tmp_path: Path):
    root = tmp_path / "traces"
    matrix_run(root, 11, verdicts(get_gaps=0, search_gaps=0), 0, profile="hardened")
    matrix_run(root, 13, verdicts(get_gaps=0, search_gaps=1), 10, profile="hardened")
    con = db.connect(root)
    try:
        cells, totals, homes = seeds.load(con)
    finally:
        con.close()
    zero = seeds.zero_frame(totals, homes)
    assert zero[["seed", "gaps/judged", "gap paths"]].values.tolist() == [
        [11, "0/7", "-"], [13, "1/7", "search"]]
    text = seeds.section(seeds.spread_frame(cells), zero)
    assert "pooled 1/14" in text
    assert "1 run(s) have gaps: seed 13, ? tenants x 8 fleets, ? random probes: 1/7 on search" in (
        text)
