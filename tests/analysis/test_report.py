"""report.build and its CLI write every table, figure and REPRODUCTION.md from traces."""

from __future__ import annotations

import pytest

from fleetprobe.analysis import report

FIGURES = ("fig2_leakage_envelope", "fig3_search_latency", "fig4_hop_latency",
           "fig5_visibility", "fig6_window", "fig7_write_latency")

TABLES = ("table2", "table3", "reprobe", "profiles", "search_leak_hypothesis",
          "contradiction_admission", "redistribute", "ablation_pacing", "ablation_contradiction")


@pytest.fixture(scope="module")
def built(fixture_traces, tmp_path_factory):
    return report.build(fixture_traces[0], tmp_path_factory.mktemp("reports"))


def test_every_table_is_written_in_three_formats(built):
    tables_dir = built["out_dir"] / "tables"
    for name in TABLES:
        for ext in ("csv", "md", "tex"):
            assert (tables_dir / f"{name}.{ext}").stat().st_size > 0, f"{name}.{ext}"
    assert "\\begin{tabular}" in (tables_dir / "table2.tex").read_text()
    table2 = (tables_dir / "table2.csv").read_text()
    assert "117/120 = 0.975 [0.929, 0.991]" in table2


def test_every_paper_figure_is_drawn_as_png_and_pdf(built):
    for name in FIGURES:
        output = built["figures"][name]
        assert output.note == ""
        assert sorted(p.suffix for p in output.paths) == [".pdf", ".png"]
        assert all(p.stat().st_size > 1000 for p in output.paths)


def test_reproduction_page_names_runs_and_hypothesis(built, fixture_traces):
    text = built["reproduction"].read_text()
    ids = fixture_traces[1]
    assert ids["provenance_0530"] in text and ids["contradiction_0530"] in text
    assert "Exactly 72/164 and 4/28: `no_fleet` x `fleet_ids` (memclaw-2026-05-30)." in text
    assert "| exact_duplicate" in text or "exact_duplicate |" in text


def test_profiles_side_by_side_has_a_column_per_profile(built):
    frame = built["tables"]["profiles"].frame
    assert {"memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "naive"} <= set(frame)
    row = frame[frame.metric == "re-probe: trust-1 cross-fleet GET returned the row"].iloc[0]
    assert row["memclaw-2026-05-30"].startswith("36/36")
    assert row["memclaw-2026-05-31"].startswith("0/36")


def test_empty_traces_give_notes_not_errors(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    built = report.build(traces, tmp_path / "out")
    assert built["notes"][0].startswith("No runs found")
    assert all(not f.paths and f.note for f in built["figures"].values())
    assert all(built["figures"][name].note.startswith("Not drawn") for name in FIGURES)
    assert "Not available" in (tmp_path / "out" / "tables" / "table3.md").read_text()
    assert "0 reproduced" in built["reproduction"].read_text()


def test_cli_writes_reports_and_refuses_unknown_runs(fixture_traces, tmp_path, capsys):
    root, ids = fixture_traces
    assert report.main(["--traces", str(root), "--out", str(tmp_path),
                        "--run", ids["provenance_0530"]]) == 0
    assert "REPRODUCTION.md" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        report.main(["--traces", str(root), "--out", str(tmp_path), "--run", "no-such-run"])
    assert exit_info.value.code == 2
    assert "no run named no-such-run" in capsys.readouterr().err


def test_a_cut_off_line_is_named_in_the_notes(built, fixture_traces):
    cut = fixture_traces[1]["provenance_proposed_cut"]
    assert any(note.startswith(f"{cut}: 1 line(s)") for note in built["notes"])


def test_redistribute_table_counts_flips_by_trust_and_relation(built):
    frame = built["tables"]["redistribute"].frame
    rows = {(r.relation, r.flipped, r.statuses) for r in frame.itertuples()}
    assert ("sibling", "0/2 [0.000, 0.658]", "403") in rows
    assert ("cross_fleet", "0/1 [0.000, 0.793]", "403") in rows


def test_the_shared_database_holds_the_shared_views_rows(fixture_traces, tmp_path):
    """write_database stores runs, rate_metrics and latency_metrics as tables: the same rows
    as the views give on a connection that parsed the traces itself."""
    from fleetprobe.analysis.base import db

    path = tmp_path / "traces.duckdb"
    db.write_database(fixture_traces[0], path)
    shared, fresh = db.open_database(path), db.connect(fixture_traces[0])
    kinds = dict(shared.execute("SELECT table_name, table_type FROM information_schema.tables")
                 .fetchall())
    for name in db.SHARED_VIEWS:
        assert kinds[name] == "BASE TABLE", name
        query = f"SELECT * FROM {name} ORDER BY ALL"
        assert shared.execute(query).fetchall() == fresh.execute(query).fetchall(), name
    assert shared.execute("SELECT count(*) FROM rate_metrics").fetchone()[0] > 0


def test_answers_and_failures_match_a_query_per_run(results):
    """Results.statuses and Results.failures (one query each) give what a query for one run
    and phase gives."""
    from fleetprobe.analysis.base.claims import failed_requests

    con = results.con
    for run_id, phase in con.execute("SELECT DISTINCT run_id, phase FROM events").fetchall():
        direct = con.execute("SELECT axis, status, count(*) FROM events WHERE run_id = ? AND "
                             "phase = ? GROUP BY ALL ORDER BY ALL", [run_id, phase]).fetchall()
        assert results.statuses[(run_id, phase)] == direct
        errors = con.execute(
            "SELECT error, count(*) AS n FROM events WHERE run_id = ? AND error IS NOT NULL "
            "AND (status IS NULL OR status >= 500 OR status = 429) "
            "GROUP BY error ORDER BY n DESC, error LIMIT 3", [run_id]).fetchall()
        assert failed_requests(results, run_id) == dict(errors)


def test_a_build_removes_the_figures_an_older_build_left(fixture_traces, tmp_path):
    figures = tmp_path / "out" / "figures"
    figures.mkdir(parents=True)
    for name in ("matrix_heatmap.pdf", "a_renamed_figure.png"):
        (figures / name).write_bytes(b"left by an older build")
    (figures / "notes.txt").write_text("not a figure: kept")
    built = report.build(fixture_traces[0], tmp_path / "out")
    drawn = {p.name for f in built["figures"].values() for p in f.paths}
    assert {p.name for p in figures.iterdir()} == drawn | {"notes.txt"}
    assert "matrix_heatmap.pdf" not in drawn and "a_renamed_figure.png" not in drawn
