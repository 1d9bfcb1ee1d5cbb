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

from fleetprobe.analysis.base.section import Context, FigureOutput, SectionOutput, finish
from fleetprobe.analysis.base.tables import Table
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
from fleetprobe.analysis.sections.backends.promises import (
    PROMISES,
    bug_reproductions,
    promises_table,
    verdict_tables,
    verdicts_figure,
)
from fleetprobe.analysis.sections.backends.targets import (
    backends_figure,
    backends_table,
    matrix_paths_table,
    reproductions,
)
from fleetprobe.analysis.sections.backends.world import profile_runs, world_note, world_table

__all__ = ["EXPERIMENTS", "KEY", "NO_MATRIX", "NO_RUNS", "TITLE",
           "_backend_matrix_runs", "_check_classes", "attribution_tables", "backends_figure",
           "backends_table", "build", "cross_tenant_table", "family", "gap_class_counts",
           "judged_probes", "matrix_paths_table", "overview_figure", "promises_table",
           "rates_table", "reproductions", "verdict_tables", "verdicts_figure", "world_note"]


def build(context: Context) -> SectionOutput:
    """tables/backends.*, tables/backends_matrix.*, figures/backends_leakage.png and
    backends_repro.md under the output directory, and the section of the page."""
    out_dir = Path(context.out_dir)
    results = context.results(EXPERIMENTS)
    try:
        # same footing: where the backends' world differs from the bundled profiles' (issue 37)
        world = {e: world_note(results, e) for e in EXPERIMENTS}
        table = replace(backends_table(results, context.traces_root),
                        views=("backend_metric_counts", "backend_matrix_counts",
                               "backend_not_applicable"))
        if not table.empty:
            table = replace(table, note=" ".join([table.note, PROMISES["leakage_note"], *(
                f"{e}: {world[e]}" for e in EXPERIMENTS if world[e] and e != "matrix")]))
        matrix = replace(matrix_paths_table(results), views=("backend_matrix_paths",))
        matrix = _with_world(matrix, world["matrix"])
        probes = _matrix_probes(results, list(_backend_matrix_runs(results).run_id))
        classes, known = attribution_tables(results, context.traces_root, probes)
        known = replace(known, views=("backend_matrix_attribution",))
        verdicts, bases, verdict_rows = verdict_tables(results, context.traces_root,
                                                       world["matrix"])
        verdicts, bases = (replace(t, views=("backend_promise_verdicts",
                                             "backend_promise_verdict_counts"))
                           for t in (verdicts, bases))
        judged = judged_probes(results, context.traces_root, probes)
        rates = replace(_with_world(rates_table(judged), world["matrix"]),
                        views=("backend_matrix_attribution",))
        crossing = replace(cross_tenant_table(judged, world["matrix"]),
                           views=("backend_matrix_attribution", "backend_promise_verdicts"))
        footing = Table("backends_world", "Same footing? The world the backends ran beside the "
                        "bundled profiles' (canonical runs' manifests)",
                        world_table(results, EXPERIMENTS),
                        "Per experiment, each world parameter and executed event count over "
                        "the backends' canonical runs and over the bundled server profiles' "
                        "(target kind reference; the engine tier has worlds of its own); "
                        "`differs` = not the same values. The bundled profiles' side is their "
                        "runs on the backends' world where they ran it (picked by manifest "
                        "params equal to the backends' but the target: "
                        "params/profiles-backend-world.yaml, -leakage.yaml), else their canonical "
                        "runs; the "
                        "backends on the profiles' full matrix world is "
                        "params/backends-profile-world.yaml (not run: several hours here). " +
                        " ".join(f"{e}: {world[e]}" for e in EXPERIMENTS if world[e]),
                        views=("runs",))
        # the catalogue's promises: what backend_promise_verdicts judges every gap against
        promised = replace(promises_table(), views=("backend_promise_verdicts",))
        tables = (verdicts, bases, promised, rates, crossing, known, classes, table,
                  matrix, footing)
        overview_files, overview_note = overview_figure(judged, out_dir / "figures",
                                                        world["matrix"])
        verdict_files, verdict_note = verdicts_figure(verdict_rows, out_dir / "figures",
                                                      world["matrix"])
        figure_files, figure_note = backends_figure(results, out_dir / "figures", table,
                                                    world["leakage"])
        repro = "\n".join([reproductions(results),
                           *bug_reproductions(results, context.traces_root)])
        canonical = results.canonical
        runs = tuple(canonical[canonical.profile.map(backend_of).notna()].run_id) + tuple(
            r for e in EXPERIMENTS for r in profile_runs(results, e)[0].run_id)
    finally:
        results.con.close()
    notes = [table.note] if table.empty else []
    if figure_note and not table.empty:
        notes.append(f"backends figure: {figure_note}")
    figures = {
        "backends_verdicts": FigureOutput(
            "backends_verdicts", "Backend gaps judged by each backend's own promise: bugs, "
            "missing features and the adapter's mapping", list(verdict_files),
            note=verdict_note, caption=" ".join([
                "n = the gaps of each backend target's canonical governance-matrix run; red: "
                "breaks the backend's own promise, grey: a MemClaw feature it lacks, blue: the "
                "adapter's mapping.", world["matrix"]]).strip(),
            views=("backend_promise_verdicts",), files=_relative(verdict_files, out_dir)),
        "backends_overview": FigureOutput(
            "backends_overview", "Backends at a glance: matrix gaps per path family, "
            "idiomatic beside strict", list(overview_files), note=overview_note,
            caption=" ".join(["n = judged probes per backend target, deployment and path "
                              "family; k = gaps.", world["matrix"]]).strip(),
            views=("backend_matrix_attribution",), files=_relative(overview_files, out_dir)),
        "backends_leakage": FigureOutput(
            "backends_leakage", "Leakage by target (canonical runs)", list(figure_files),
            note=figure_note, caption=" ".join([
                "n = judged events per target and leak metric (canonical runs); 95% Wilson "
                "intervals.", world["leakage"]]).strip(), views=("backend_metric_counts",),
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
               "backend_matrix_paths", "backend_matrix_attribution", "backend_promise_verdicts",
               "backend_promise_verdict_counts"), runs=runs,
        notebook="backends.ipynb")
    return finish(output, context)


def _with_world(table: Table, world: str) -> Table:
    """The table's note, and where the backends' world differs from the profiles' (or that
    it does not)."""
    return table if table.empty or not world else replace(table, note=f"{table.note} {world}")
