"""The backends table, its figure and the minimal reproductions, from the traces alone.

One row per target x metric: every backend run behind the wire adapter (profile
`backend-<name>`, docs/backends.md) beside the bundled server's profiles, each from its
experiment's canonical run (`Results.canonical`). A metric whose events the target answered
"not supported by this backend" is not applicable, with the reason, never a pass or a fail.
Where a backend leaks, `backends_repro.md` shows the smallest recorded case (the write and
one leaking probe, as recorded) and the backend's own issue where the same bug is known.
"""


from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fleetprobe.analysis.base.figures import FigureOutput
from fleetprobe.analysis.base.section import Context, SectionOutput, finish
from fleetprobe.analysis.sections.backends.attribution import (
    _check_classes,
    attribution_tables,
    gap_class_counts,
)
from fleetprobe.analysis.sections.backends.common import (
    EXPERIMENTS,
    KEY,
    NO_MATRIX,
    NO_RUNS,
    TITLE,
    _backend_matrix_runs,
    _matrix_probes,
    _relative,
    backend_of,
)
from fleetprobe.analysis.sections.backends.deployments import (
    cross_tenant_table,
    family,
    judged_probes,
    overview_figure,
    rates_table,
)
from fleetprobe.analysis.sections.backends.targets import (
    backends_figure,
    backends_table,
    matrix_paths_table,
    reproductions,
)

__all__ = ["EXPERIMENTS", "KEY", "NO_MATRIX", "NO_RUNS", "TITLE",
           "_backend_matrix_runs", "_check_classes", "attribution_tables", "backends_figure",
           "backends_table", "build", "cross_tenant_table", "family", "gap_class_counts",
           "judged_probes", "matrix_paths_table", "overview_figure", "rates_table",
           "reproductions"]


def build(context: Context) -> SectionOutput:
    """tables/backends.*, tables/backends_matrix.*, figures/backends_leakage.png and
    backends_repro.md under the output directory, and the section of the page."""
    out_dir = Path(context.out_dir)
    results = context.results(EXPERIMENTS)
    try:
        table = replace(backends_table(results, context.traces_root),
                        views=("backend_metric_counts", "backend_matrix_counts",
                               "backend_not_applicable"))
        matrix = replace(matrix_paths_table(results), views=("backend_matrix_paths",))
        probes = _matrix_probes(results, list(_backend_matrix_runs(results).run_id))
        classes, known = attribution_tables(results, context.traces_root, probes)
        known = replace(known, views=("backend_matrix_attribution",))
        judged = judged_probes(results, context.traces_root, probes)
        rates, crossing = (replace(t, views=("backend_matrix_attribution",)) for t in
                           (rates_table(judged), cross_tenant_table(judged)))
        tables = (rates, crossing, known, classes, table, matrix)
        overview_files, overview_note = overview_figure(judged, out_dir / "figures")
        figure_files, figure_note = backends_figure(results, out_dir / "figures", table)
        repro = reproductions(results)
        canonical = results.canonical
        runs = tuple(canonical[canonical.profile.map(backend_of).notna()].run_id)
    finally:
        results.con.close()
    notes = [table.note] if table.empty else []
    if figure_note and not table.empty:
        notes.append(f"backends figure: {figure_note}")
    figures = {
        "backends_overview": FigureOutput(
            "backends_overview", "Backends at a glance: matrix gaps per path family, "
            "idiomatic beside strict", list(overview_files), note=overview_note,
            views=("backend_matrix_attribution",), files=_relative(overview_files, out_dir)),
        "backends_leakage": FigureOutput(
            "backends_leakage", "Leakage by target (canonical runs)", list(figure_files),
            note=figure_note, views=("backend_metric_counts",),
            files=_relative(figure_files, out_dir))}
    output = SectionOutput(
        KEY, TITLE,
        "The same experiments behind the wire adapter against other memory systems, each "
        "through its own scoping mechanism, beside the bundled profiles; minimal "
        "reproductions of every leak in backends_repro.md. Its figures are PNG only: this page "
        "and the notebook show them, nothing reads a PDF of them, and the PDFs took as long "
        "again to draw.",
        tables={t.name: t for t in tables}, figures=figures,
        files={"backends_repro.md": repro.encode()}, notes=notes,
        views=("backend_metric_counts", "backend_matrix_counts", "backend_not_applicable",
               "backend_matrix_paths", "backend_matrix_attribution"), runs=runs,
        notebook="backends.ipynb")
    return finish(output, context)
