"""The governance matrix (beyond the paper), from the traces alone (metrics.sql `matrix_*`).

Per target (a profile of the bundled server, or a live endpoint), from its canonical matrix
run: a heatmap (target x path family, colour = gap rate, gaps/n in each cell), the gap
catalogue (path, principal, what leaks or changes, count, a minimal HTTP reproduction and the
mechanism in one sentence), the cross-tenant tally, the paper's two rates at N = 2 F^2 K, and
one summary line per target. Written to reports/MATRIX.md (the summary), one page per target
(reports/matrix/<target>.md, `pages`), reports/tables/matrix_*.csv and
reports/figures/matrix_heatmap.png; without matrix runs the section says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from fleetprobe.analysis.base.catalogues import catalogue as prose
from fleetprobe.analysis.base.section import Context, FigureOutput, SectionOutput, finish
from fleetprobe.analysis.base.stats import rate
from fleetprobe.analysis.base.tables import Table
from fleetprobe.analysis.sections.matrix import pages, seeds
from fleetprobe.analysis.sections.matrix.common import (
    EXPERIMENTS,
    HEATMAP_FILE,
    KEY,
    NO_RUNS,
    PATH_ORDER,
    PRINCIPALS,
    RUN_VIEWS,
    TABLES,
    TITLE,
    VIEWS,
    _label,
)
from fleetprobe.analysis.sections.matrix.common import order as _order

# The prose of the gap catalogue (matrix_catalogue.yaml): a minimal HTTP reproduction and a
# mechanism per path, and why a backend does what the matrix found, per path family.
CATALOGUE = prose("matrix")
REPRODUCTION: dict[str, str] = CATALOGUE["reproduction"]
MECHANISM: dict[str, str] = CATALOGUE["mechanism"]
MISS: dict[str, str] = CATALOGUE["miss"]
DRIFT, FLAT = CATALOGUE["drift"], CATALOGUE["flat"]
BACKEND_MECHANISM: dict[tuple[str, str], str] = {
    (backend, family): text for backend, families in CATALOGUE["backend_mechanism"].items()
    for family, text in families.items()}
MATRIX_WRITE, MATRIX_MISS = CATALOGUE["backend_write"], CATALOGUE["backend_miss"]
BACKEND_PREFIX = "backend-"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass
class MatrixSection:
    markdown: str
    tables: dict[str, Table] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    catalogue: pd.DataFrame = field(default_factory=pd.DataFrame)
    heatmap: bytes = b""  # figures/matrix_heatmap.png
    pages: dict[str, str] = field(default_factory=dict)  # matrix/<target>.md by path

    @property
    def document(self) -> str:
        """MATRIX.md."""
        return self.markdown if self.tables else f"# Governance matrix\n\n{NO_RUNS}\n"


def load(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
    """The matrix views restricted to each target's canonical run."""
    runs = con.execute("SELECT * FROM matrix_canonical").df()
    if runs.empty:
        return {}
    ids = list(runs.run_id)
    out = {"runs": runs}
    for view in RUN_VIEWS:
        # ORDER BY ALL: a total order, so committed tables are a pure function of the traces
        frame = con.execute(f"SELECT * FROM {view} WHERE run_id IN "
                            f"(SELECT unnest(?::VARCHAR[])) ORDER BY ALL", [ids]).df()
        labels = {r.run_id: _label(r.profile, r.target_kind) for r in runs.itertuples()}
        frame["target"] = frame["run_id"].map(labels)
        out[view] = frame
    return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def reproduction(row: Mapping[str, Any]) -> str:
    """A catalogue line's HTTP reproduction, from its example probe (a row of the catalogue
    view, as a dict or a Series)."""
    template = REPRODUCTION.get(row["path"], "{path}")
    fleets = _text(row.get("fleets")).replace(",", '","')
    text = template.format(who=_text(row.get("who")) or "?",
                           row=_text(row.get("row_key")) or "?", fleets=fleets or "<fleet>",
                           target=_text(row.get("target_agent")) or "?", path=row["path"])
    variant = _text(row.get("variant"))
    if variant:
        text += (" with tenant_id=<the row's tenant>" if variant == "named"
                 else " with tenant_id=<the caller's own tenant>")
    status = row.get("example_status")
    answer = f" -> {int(status)}" if pd.notna(status) else ""
    return f"as {_text(row.get('who'))} (X-API-Key of that principal): {text}{answer}"


def mechanism(row: pd.Series | object) -> str:
    """One sentence for a catalogue line: the bundled server's mechanism for a bundled
    profile (target kind `reference`); for any other target, what it answered."""
    profile, path, verdict = str(row.profile), row.path, row.verdict
    if getattr(row, "target_kind", "reference") != "reference":
        return answered(row)
    if profile == "naive" and verdict == "gap":
        return FLAT
    if verdict == "miss":
        return MISS.get("search" if path.startswith(("search", "recall")) else path,
                        "The path withholds a row the policy lets the caller read.")
    return MECHANISM.get(path, "")


def answered(row: pd.Series | object) -> str:
    """A live, engine or backend target's line, from its trace: the request, the status it
    answered and what that did; for a backend, its library's documented behaviour beside."""
    status = getattr(row, "example_status", None)
    answer = f"HTTP {int(status)}" if pd.notna(status) else "no HTTP answer"
    op = UUID.sub("<id>", _text(getattr(row, "op", None))) or row.path
    text = (f"{row.target} answered {op} with {answer} ({int(row.count)} probe(s) by "
            f"{row.principal}): it {row.what}, which the policy "
            f"{'denies' if row.verdict == 'gap' else 'requires to return'}; no mechanism is "
            "known for this target beyond its answers.")
    backend = str(row.profile)[len(BACKEND_PREFIX):] if str(row.profile).startswith(
        BACKEND_PREFIX) else None
    if backend is None:
        return text
    if row.verdict == "miss":
        documented = MATRIX_MISS
    elif row.path in ("write", "bulk_write", "entity_upsert"):
        documented = MATRIX_WRITE
    else:
        documented = BACKEND_MECHANISM.get(
            (backend, "search" if row.path.startswith("search") else row.path), "")
    return f"{text} Documented for {backend} (docs/backends.md): {documented}" if documented \
        else text


def catalogue(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    cat = frames["matrix_gap_catalogue"].copy()
    if cat.empty:
        return pd.DataFrame(columns=["target", "path", "principal", "verdict", "what", "count",
                                     "visibilities", "reproduction", "mechanism"])
    cat["reproduction"] = [reproduction(r) for r in cat.to_dict("records")]
    drifted = set(frames["matrix_agent_drift"].run_id)
    kinds = dict(zip(frames["runs"].run_id, frames["runs"].target_kind, strict=True))
    cat["target_kind"] = cat.run_id.map(kinds)
    cat["mechanism"] = [
        mechanism(r)
        + (" " + DRIFT if r.run_id in drifted and "homeless" in r.principal
           and r.target_kind == "reference" else "")
        for r in cat.itertuples()]
    path_rank = {p: i for i, p in enumerate(PATH_ORDER)}
    who_rank = {p: i for i, p in enumerate(PRINCIPALS)}
    target_rank = {t: i for i, t in enumerate(_order(list(cat.target.unique())))}
    cat = cat.sort_values(["target", "path", "principal", "verdict", "what"], key=lambda s: (
        s.map(target_rank) if s.name == "target" else s.map(path_rank) if s.name == "path"
        else s.map(who_rank) if s.name == "principal" else s))
    return cat[["target", "path", "principal", "verdict", "what", "count", "visibilities",
                "example_probe", "reproduction", "mechanism"]].reset_index(drop=True)


def grouped(cat: pd.DataFrame) -> pd.DataFrame:
    """The catalogue for reading: one line per (target, path, verdict, what), the principals
    it holds for, one reproduction (of the first principal listed) and the mechanism."""
    if cat.empty:
        return pd.DataFrame(columns=["target", "path", "verdict", "what", "count", "principals",
                                     "reproduction", "mechanism"])
    groups = cat.groupby(["target", "path", "verdict", "what"], sort=False)
    frame = groups.agg(count=("count", "sum"), principals=("principal", _listed),
                       reproduction=("reproduction", "first"), mechanism=("mechanism", "first"))
    return frame.reset_index().astype({"count": int})


def _listed(values: pd.Series) -> str:
    """The distinct values, in order of first appearance."""
    return ", ".join(dict.fromkeys(values))


def summary(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    s = frames["matrix_summary"].copy()
    rates = frames["matrix_paper_rates"]
    for metric, column in (("tenant-key GET exposure (expected deny)", "paper_get_exposure"),
                           ("search leak rate (expected deny)", "paper_search_leak")):
        values = {}
        for r in rates[rates.metric == metric].itertuples():
            x = rate(int(r.numerator), int(r.denominator))
            values[r.run_id] = (f"{x.k}/{x.n} = {x.value:.3f} [{x.low:.3f}, {x.high:.3f}]"
                                if x.n else "")
        s[column] = [values.get(run, "not run") for run in s.run_id]
    s = s.set_index("target").loc[_order(list(s.target))].reset_index()
    return s[["target", "run_id", "complete", "incomplete_reason", "shortfalls", "probes",
              "random_probes", "gaps", "misses", "oracles", "side_effects", "refused",
              "not_applicable", "errors", "cross_tenant_probes", "cross_tenant_successes",
              "agents_drifted", "paper_get_exposure", "paper_search_leak"]]


def paper_rates(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for r in frames["matrix_paper_rates"].itertuples():
        x = rate(int(r.numerator), int(r.denominator))
        rows.append({"target": r.target, "metric": r.metric, "k": x.k, "n": x.n,
                     "rate": round(x.value, 4) if x.n else None,
                     "ci_low": round(x.low, 4) if x.n else None,
                     "ci_high": round(x.high, 4) if x.n else None})
    frame = pd.DataFrame(rows, columns=["target", "metric", "k", "n", "rate", "ci_low",
                                        "ci_high"])
    # a total order, so the committed table is a pure function of the traces
    return frame.sort_values(["target", "metric"], kind="stable").reset_index(drop=True)


def _by_target(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` of a per-run view, targets in report order (rows in view order within)."""
    rank = {t: i for i, t in enumerate(_order(list(frame.target.unique())))}
    frame = frame.sort_values("target", key=lambda s: s.map(rank), kind="stable")
    return frame[columns].reset_index(drop=True)


def write(con: duckdb.DuckDBPyConnection) -> MatrixSection:
    """MATRIX.md, the matrix tables (CSV) and the heatmap (or the 'no runs yet' note)."""
    frames = load(con)
    if not frames:
        return MatrixSection(NO_RUNS, {}, [NO_RUNS])
    summ, cat = summary(frames), catalogue(frames)
    cross = frames["matrix_cross_tenant"].groupby("target", as_index=False)[
        ["probes", "successes"]].sum()
    papers = paper_rates(frames)
    na = frames["matrix_not_applicable"][["target", "path", "probes", "reason"]]
    na_reasons = _by_target(frames["matrix_na_reasons"],
                            ["target", "reason", "probes", "paths", "example_probe"])
    oracles, effects = (_by_target(frames[v], ["target", "path", "what", "count",
                                               "example_probe"])
                        for v in ("matrix_oracles", "matrix_side_effects"))
    census = _by_target(frames["matrix_entity_census"],
                        ["target", "entities", "entities_read", "linked_rows",
                         "entity_links_skipped"])
    drift = frames["matrix_agent_drift"][["target", "who", "trust_before", "trust_after",
                                          "home_before", "home_after"]]
    detail = cat.drop(columns=["reproduction", "mechanism"])
    tables = {}
    for name, frame in (("matrix_summary", summ), ("matrix_gaps", detail),
                        ("matrix_cross_tenant", cross), ("matrix_paper_rates", papers),
                        ("matrix_not_applicable", na), ("matrix_na_reasons", na_reasons),
                        ("matrix_oracles", oracles), ("matrix_side_effects", effects),
                        ("matrix_entity_census", census), ("matrix_agent_drift", drift)):
        view = "matrix_gap_catalogue" if name == "matrix_gaps" else name
        tables[name] = Table(name, name.replace("_", " "), frame, views=(view,),
                             formats=("csv",), split_by="target")
    seed_cells, totals, homes = seeds.load(con)
    spread, zero = seeds.spread_frame(seed_cells), seeds.zero_frame(totals, homes)
    tables[seeds.SPREAD] = Table(seeds.SPREAD, "matrix between-seed spread", spread,
                                 views=seeds.SPREAD_VIEWS, formats=("csv",))
    tables[seeds.ZERO] = Table(seeds.ZERO, f"matrix: {seeds.HARDENED} on every seed and world",
                               zero, views=seeds.ZERO_VIEWS, formats=("csv",))
    cells = frames["matrix_cells"]
    text = pages.summary_document(summ, cross, papers, cells, len(detail),
                                  seeds.section(spread, zero))
    lists = {"matrix_not_applicable": na, "matrix_na_reasons": na_reasons,
             "matrix_oracles": oracles, "matrix_side_effects": effects,
             "matrix_entity_census": census, "matrix_agent_drift": drift}
    readable = grouped(cat)
    target_pages = {
        pages.page_name(row.target): pages.target_page(
            row.target, row.drop("target"), cells[cells.target == row.target], lists,
            readable)
        for _, row in summ.iterrows()}
    # drawn in the section's process only: the composing one unpickles MatrixSection
    # without importing matplotlib
    from fleetprobe.analysis.sections.matrix.figure import heatmap

    return MatrixSection(text, tables, [], summ, cat, heatmap(cells), target_pages)


def build(context: Context) -> SectionOutput:
    """MATRIX.md, the matrix tables and the heatmap, and the section of the page."""
    results = context.results(EXPERIMENTS)
    try:
        section = write(results.con)
    finally:
        results.con.close()
    runs = tuple(section.summary.run_id) if not section.summary.empty else ()
    tables = {name: section.tables[name] for name in TABLES if name in section.tables}
    figures = {"matrix_heatmap": FigureOutput(
        "matrix_heatmap", "matrix heatmap: gaps / judged probes per target and path family",
        [context.out_dir / "figures" / HEATMAP_FILE],
        views=("matrix_cells",), files={f"figures/{HEATMAP_FILE}": section.heatmap})
        } if section.heatmap else {}
    output = SectionOutput(
        KEY, TITLE,
        "Every principal (tenant key; agent keys at trust 0-3 by relation to the row; another "
        "tenant) x every path, judged against the written policy: gaps (returns, reveals or "
        "changes what the policy denies) and misses per target, the cross-tenant tally, the "
        "gap catalogue with a reproduction and a mechanism per line. Summary: MATRIX.md; "
        "each target's grid (principal x path family, gaps/n per cell), lists and catalogue: "
        "matrix/<target>.md. The heatmap (targets x path families, gaps/n in each cell) is a "
        "PNG only: nothing reads a PDF of it.",
        tables=tables, figures=figures,
        files={"MATRIX.md": section.document.encode(),
               **{name: text.encode() for name, text in section.pages.items()}},
        notes=[n for n in section.notes if n != NO_RUNS], notebook="matrix.ipynb",
        views=VIEWS, runs=runs, data={"matrix": section})
    return finish(output, context)
