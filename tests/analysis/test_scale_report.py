"""The Scale table: 10x runs (PostgreSQL, background memories) beside the paper-scale canonical
run, kept out of Table 2; read from a gzip-compressed events file as committed."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.report import build
from fleetprobe.analysis.sections import scale as scale_report

from .fixtures.builders import PAPER_PLANNED, build_fixture_traces, leakage_bulk, write_run

SCALE_PARAMS = {"fleets": 4, "agents_per_fleet": 60,
                "target": {"kind": "reference", "storage": "postgres",
                           "background_memories": 100000}}


def _scale_run(root: Path) -> str:
    run = write_run(root, "20260601T120000Z-leakage-seed7", "leakage",
                    leakage_bulk("fleet_id", "fleet_ids", foreign_fleet_secrets_leak=True),
                    planned=PAPER_PLANNED["leakage"], started_minute=500, params=SCALE_PARAMS)
    events = run / "events.jsonl"
    with gzip.GzipFile(run / "events.jsonl.gz", "wb", mtime=0) as packed:
        packed.write(events.read_bytes())
    events.unlink()
    return run.name


def test_no_scale_runs_says_how_to_make_them(tmp_path: Path) -> None:
    build_fixture_traces(tmp_path)
    table = scale_report.scale_table(Results.load(tmp_path))
    assert table.empty and "make scale10x" in table.note


def test_scale_run_sits_beside_the_paper_scale_run(tmp_path: Path) -> None:
    build_fixture_traces(tmp_path)
    scale_id = _scale_run(tmp_path)
    results = Results.load(tmp_path)
    table = scale_report.scale_table(results)
    leak = table.frame[table.frame.metric == "search leak rate (expected deny)"].iloc[0]
    assert leak["paper scale"].startswith("0/164")  # the canonical run: no leak
    assert leak["10x scale"].startswith("72/164")   # read from events.jsonl.gz
    assert "postgres (hnsw search); 100000 background" in leak["scale run"]
    canonical = results.canonical
    assert scale_id not in set(canonical.run_id)  # an ablation: never Table 2's run
    runs = results.runs.set_index("run_id")
    assert "agents_per_fleet: 60 (headline: at most 6)" in runs.loc[scale_id, "differs"]


def test_report_writes_the_scale_section(tmp_path: Path) -> None:
    build_fixture_traces(tmp_path / "traces")
    _scale_run(tmp_path / "traces")
    built = build(tmp_path / "traces", tmp_path / "out")
    page = (tmp_path / "out" / "REPRODUCTION.md").read_text()
    assert "## Scale: 10x the paper's population" in page and "72/164" in page
    assert (tmp_path / "out" / "tables" / "scale.md").is_file()
    assert not built["tables"]["scale"].empty


def _recall_row(store: str, n: int, mode: str, ef: int | None, recall: float,
                default: bool) -> dict:
    return {"store": store, "n": n, "mode": mode, "ef_search": ef, "server_default": default,
            "recall_gated_at_10": recall, "recall_gated_at_40": recall, "p50_ms": 1.5,
            "gated_rows": 200, "load": 2.0, "seed_s": 3.0}


def test_recall_evidence_gives_misses_per_setting_and_a_figure(tmp_path: Path) -> None:
    """bench_recall.py's JSON beside the traces: misses = 1 - recall@10 per store, size and
    setting, in a table and a figure of the report; absent, the section says how to make it."""
    build_fixture_traces(tmp_path / "traces")
    assert scale_report.recall_table(
        scale_report.recall_rows(tmp_path / "scale" / "recall.json")).empty
    evidence = [_recall_row("postgres", 100_000, "hnsw", 40, 0.75, False),
                _recall_row("postgres", 10_000, "hnsw", 40, 0.97, False),
                _recall_row("postgres", 10_000, "exact", None, 1.0, True),
                _recall_row("sqlite", 10_000, "exact", None, 1.0, True)]
    (tmp_path / "scale").mkdir()
    (tmp_path / "scale" / "recall.json").write_text(json.dumps(evidence))
    frame = scale_report.recall_rows(tmp_path / "scale" / "recall.json")
    hnsw = frame[frame.setting == "postgres hnsw ef_search 40"]
    assert list(hnsw.n) == [10_000, 100_000]
    assert [round(m, 4) for m in hnsw.misses_at_10] == [0.03, 0.25]
    build(tmp_path / "traces", tmp_path / "out")
    table = (tmp_path / "out" / "tables" / "scale_recall.md").read_text()
    assert "sqlite exact (default)" in table and "postgres hnsw ef_search 40" in table
    assert (tmp_path / "out" / "figures" / "scale_recall.png").is_file()
    page = (tmp_path / "out" / "REPRODUCTION.md").read_text()
    assert "misses of scoped search vs store size" in page and "0.25 " in page


def test_an_hnsw_store_ranking_scoped_searches_exactly_is_its_own_setting(
        tmp_path: Path) -> None:
    """bench_recall.py now also measures an HNSW store as the server runs it (fleet-scoped
    searches ranked exactly: `index_walk` false) beside the index walk at each ef_search;
    the two are separate settings, and rows without the field (older evidence) are walks."""
    store_row = {**_recall_row("postgres", 100_000, "hnsw", 100, 1.0, False),
                 "index_walk": False}
    walk = {**_recall_row("postgres", 100_000, "hnsw", 100, 0.83, False), "index_walk": True}
    (tmp_path / "recall.json").write_text(json.dumps([store_row, walk]))
    frame = scale_report.recall_rows(tmp_path / "recall.json")
    assert sorted(frame.setting) == ["postgres hnsw ef_search 100",
                                     "postgres hnsw store (fleet-scoped: exact)"]
    old = _recall_row("postgres", 100_000, "hnsw", 100, 0.83, False)
    (tmp_path / "recall.json").write_text(json.dumps([old]))
    assert list(scale_report.recall_rows(tmp_path / "recall.json").setting) == [
        "postgres hnsw ef_search 100"]
