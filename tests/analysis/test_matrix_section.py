"""The matrix section on traces in the reworked checker's shape (oracles, side effects, n/a
reasons, the entity census, unregistered principals, shortfalls) and on traces from before
it (those categories absent: zero, or an empty table)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from fleetprobe.analysis.base import db
from fleetprobe.analysis.sections import matrix
from fleetprobe.analysis.sections.matrix import common, figure
from fleetprobe.oracle.policy import PATHS

from .fixtures.builders import matrix_reworked, write_run

NEW_PATHS = ("recall_agent", "recall_fleet", "recall_fleets", "patch_content", "dup_fast",
             "dup_exact_fleet", "dup_near_fleet")
SHORTFALL = "3 of 40 planned probes not sent, their principal is missing"


@pytest.fixture()
def reworked(tmp_path: Path) -> matrix.MatrixSection:
    root = tmp_path / "traces"
    write_run(root, "20261202T070000Z-matrix-seed11", "matrix", matrix_reworked(),
              complete=False, manifest_extra={
                  "incomplete_reason": SHORTFALL, "shortfalls": [SHORTFALL],
                  "skipped": [{"probe": "entity links", "reason": "the target kept no entity "
                               "link for 2 rows written with one (entity census)"}]})
    con = db.connect(root)
    try:
        return matrix.write(con)
    finally:
        con.close()


def table(section: matrix.MatrixSection, name: str) -> pd.DataFrame:
    """The table as its CSV file reads back."""
    return pd.read_csv(io.BytesIO(section.tables[name].files()[f"tables/{name}.csv"]))


def test_probe_counts_leave_side_effects_out_and_tally_them_apart(reworked):
    row = reworked.summary.iloc[0]
    # 3 gaps + 4 oracles + 5 + 2 n/a probes; the 2 `+effect` verdicts are not probes
    assert (row.probes, row.gaps, row.oracles, row.side_effects, row.not_applicable) == (
        14, 3, 4, 2, 7)
    assert not row.complete
    assert row.incomplete_reason == SHORTFALL and row.shortfalls == SHORTFALL


def test_oracles_and_side_effects_each_get_a_table_with_an_example_probe(reworked):
    oracles = table(reworked, "matrix_oracles")
    assert oracles[["path", "what", "count", "example_probe"]].values.tolist() == [
        ["dup_fast", "reveals that the key exists", 4, "o0"]]
    effects = table(reworked, "matrix_side_effects")
    assert effects[["path", "count", "example_probe"]].values.tolist() == [
        ["dup_fast", 2, "o0+effect"]]
    assert "registers the unknown agent id" in effects.what[0]
    page = "".join(reworked.pages.values())
    assert "## Existence oracles" in page and "o0+effect" in page


def test_not_applicable_probes_are_grouped_by_reason(reworked):
    reasons = table(reworked, "matrix_na_reasons").set_index("reason")
    assert reasons.probes.to_dict() == {"404 Not Found": 5,
                                        "the target kept no entity link for this row": 2}
    assert reasons.paths["404 Not Found"] == "recall_fleets"


def test_the_entity_census_and_its_skip_are_shown(reworked):
    census = table(reworked, "matrix_entity_census")
    assert census[["entities", "entities_read", "linked_rows"]].values.tolist() == [[2, 2, 3]]
    assert "2 rows written with one" in census.entity_links_skipped[0]


def test_unregistered_principals_are_catalogued_and_drawn(reworked):
    assert set(reworked.catalogue.principal) == {"unregistered other_fleet"}
    assert "unregistered other_fleet" in matrix.PRINCIPALS


def test_registered_is_read_as_a_boolean(tmp_path):
    write_run(tmp_path, "20261202T070000Z-matrix-seed11", "matrix", matrix_reworked())
    con = db.connect(tmp_path)
    try:
        kind, value = con.execute("SELECT typeof(registered), registered FROM events "
                                  "WHERE phase = 'census_agent'").fetchone()
    finally:
        con.close()
    assert (kind, value) == ("BOOLEAN", False)


def test_a_run_from_before_the_rework_shows_zero_and_empty_tables(tmp_path):
    events = [{"phase": "verdict", "probe_id": "p0", "path": "get", "principal": "t1 own",
               "relation": "own", "trust": 1, "expected": "allow", "verdict": "ok",
               "cross_tenant": False}]
    write_run(tmp_path / "traces", "20261201T175200Z-matrix-seed11", "matrix", events)
    con = db.connect(tmp_path / "traces")
    try:
        section = matrix.write(con)
    finally:
        con.close()
    row = section.summary.iloc[0]
    assert (row.probes, row.oracles, row.side_effects) == (1, 0, 0)
    assert pd.isna(row.shortfalls)
    for name in ("matrix_oracles", "matrix_side_effects", "matrix_na_reasons",
                 "matrix_entity_census"):
        assert table(section, name).empty, name
    assert "no entity census in this run" in "".join(section.pages.values())


@pytest.mark.parametrize("path", NEW_PATHS)
def test_every_new_path_has_a_reproduction_and_a_mechanism(path):
    assert path in PATHS
    row = pd.Series({"path": path, "who": "A.f1t2", "row_key": "A.r3", "fleets": "fleet-1",
                     "target_agent": None, "variant": None, "example_status": 200.0})
    line = matrix.reproduction(row)
    assert line.startswith("as A.f1t2") and "A.r3" in line and line.endswith("-> 200")
    assert matrix.MECHANISM[path] and "wire contract" in matrix.MECHANISM[path]


def test_every_policy_path_is_reproducible_and_explained():
    assert set(PATHS) <= set(matrix.REPRODUCTION) and set(PATHS) <= set(matrix.MECHANISM)


def _cells(targets: dict[str, dict[tuple[str, str], tuple[int, int, int]]]) -> pd.DataFrame:
    """matrix_cells rows: {target: {(principal, path): (n, gaps, misses)}}."""
    return pd.DataFrame([{"target": t, "principal": who, "path": path, "n": n, "gaps": g,
                          "misses": m}
                         for t, cells in targets.items()
                         for (who, path), (n, g, m) in cells.items()])


def test_heatmap_grids_sum_each_family_with_its_n():
    cells = _cells({"hardened": {("t1 own", "get"): (4, 1, 0), ("t1 own", "list"): (0, 0, 2)},
                    "naive": {("t1 own", "get"): (2, 1, 0), ("t2 own", "get"): (3, 3, 1)}})
    gaps, n, misses = figure.heatmap_grids(cells, ["hardened", "naive"])
    read, listed = common.FAMILIES.index("read by id"), common.FAMILIES.index("list")
    assert gaps.shape == n.shape == misses.shape == (2, len(common.FAMILIES))
    assert (gaps[0, read], n[0, read]) == (1, 4) and (gaps[1, read], n[1, read]) == (4, 5)
    assert misses[0, listed] == 2 and misses[1, read] == 1
    assert common.cell_text(4, 5, 1) == "4/5 +1m" and common.cell_text(0, 0, 0) == "-"


def test_heatmap_is_one_png_a_row_per_target_at_page_width():
    from PIL import Image

    targets = [f"target-{i}" for i in range(4)]
    whos, paths = list(matrix.PRINCIPALS[:3]), list(matrix.PATH_ORDER[:5])
    cells = _cells({t: {(w, p): (2, i % 3, 0) for w in whos for p in paths}
                    for i, t in enumerate(targets)})
    image = Image.open(io.BytesIO(figure.heatmap(cells)))
    dpi = figure.HEATMAP_DPI
    width = figure.LEFT + figure.CELL_W * len(common.FAMILIES) + figure.RIGHT
    assert image.width == round(width * dpi) and width <= 10  # a page's width, no wider
    assert image.height == round((figure.TOP + figure.CELL_H * len(targets)
                                  + figure.BOTTOM) * dpi)


def test_each_target_has_a_page_with_n_per_cell(reworked):
    assert reworked.pages and all(name.startswith("matrix/") for name in reworked.pages)
    page = next(iter(reworked.pages.values()))
    assert "## Grid: principal x path family" in page and "/" in page
    assert "../MATRIX.md" in page
    assert all(name in reworked.markdown for name in reworked.pages)
