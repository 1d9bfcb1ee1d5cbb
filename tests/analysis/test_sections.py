"""The report's sections: a registry of independent modules, composed in parallel processes
into the same bytes as one after the other; mechanism sentences only from a target's own
answers."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from fleetprobe.analysis import report, sections
from fleetprobe.analysis.base import basis
from fleetprobe.analysis.base import claims as verdict
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.section import (
    REPRODUCTION,
    Context,
    Fragment,
    SectionOutput,
    compose,
    finish,
)
from fleetprobe.analysis.sections import matrix

from .fixtures.builders import leakage_table3, write_run

SECTIONS_DIR = Path(sections.__file__).parent


def test_every_registered_section_has_one_entry_point_and_imports_no_other_section():
    assert list(sections.REGISTRY)[:5] == ["verdict", "leakage", "provenance", "propagation",
                                          "contradiction"]
    assert {"matrix", "separation", "faults", "backends", "scale", "embedder", "live_targets",
            "fidelity"} <= set(sections.REGISTRY)
    for key, section in sections.REGISTRY.items():
        package = SECTIONS_DIR / section.module.replace(".", "/")
        paths = sorted(package.glob("*.py")) if package.is_dir() else [
            SECTIONS_DIR / f"{section.module.replace('.', '/')}.py"]
        entry = package / "__init__.py" if package.is_dir() else paths[0]
        builds = [n for n in ast.parse(entry.read_text()).body
                  if isinstance(n, ast.FunctionDef) and n.name == "build"]
        assert len(builds) == 1, key
        own = f"fleetprobe.analysis.sections.{section.module}"
        for path in paths:
            tree = ast.parse(path.read_text())
            imported = {node.module for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom) and node.module}
            imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                         for alias in node.names}
            others = {m for m in imported if m.startswith("fleetprobe.analysis")
                      and not m.startswith(("fleetprobe.analysis.base", own))}
            assert not others, f"{key} imports {others}"


def test_a_section_registers_every_experiment_it_reads():
    """The registry's experiments decide when a kept section is stale: they must hold every
    experiment whose events the section asks for (None: every run)."""
    for key, section in sections.REGISTRY.items():
        module = sections_module(section.module)
        if section.experiments is not None:
            assert set(module.EXPERIMENTS) <= set(section.experiments), key


def test_fragments_are_composed_by_order_whatever_order_they_arrive_in():
    fragments = [Fragment(REPRODUCTION, 30, "## c\n\nthird\n"), Fragment("OTHER.md", 1, "x"),
                 Fragment(REPRODUCTION, 10, "# a\n\nfirst"), Fragment(REPRODUCTION, 20, "## b")]
    assert compose(fragments, REPRODUCTION) == "# a\n\nfirst\n\n## b\n\n## c\n\nthird\n"
    assert compose(list(reversed(fragments)), REPRODUCTION) == compose(fragments, REPRODUCTION)


def test_parallel_build_writes_the_same_bytes_as_one_process(fixture_traces, tmp_path):
    one = report.build(fixture_traces[0], tmp_path / "one", jobs=1)
    two = report.build(fixture_traces[0], tmp_path / "two", jobs=2)
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*")
                   if p.is_file())
    assert files and files == sorted(p.relative_to(tmp_path / "two")
                                     for p in (tmp_path / "two").rglob("*") if p.is_file())
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), \
            name
    assert list(one["sections"]) == list(two["sections"]) == list(sections.REGISTRY)
    assert [v.status for v in one["verdicts"]] == [v.status for v in two["verdicts"]]


def test_a_new_section_is_one_module_and_one_registration_line(fixture_traces, tmp_path,
                                                                monkeypatch):
    module = types.ModuleType("fleetprobe.analysis.sections.example_view")

    def build(context: Context) -> SectionOutput:
        results = context.results(("leakage",))
        try:
            runs = tuple(results.canonical[results.canonical.experiment == "leakage"].run_id)
        finally:
            results.con.close()
        return finish(SectionOutput(
            "example_view", "Example view", "A section added by one module.",
            fragments=[Fragment(REPRODUCTION, 95, "## Example view\n\nfrom the traces")],
            runs=runs), context)

    module.build = build  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(sections, "REGISTRY", dict(sections.REGISTRY))
    sections.register("example_view", "example_view", ("leakage",))
    built = report.build(fixture_traces[0], tmp_path, jobs=1)
    page = (tmp_path / "index.html").read_text()
    assert "<h2 id='example_view'>Example view</h2>" in page
    assert "<a href='#example_view'>Example view</a>" in page
    text = built["reproduction"].read_text()
    assert text.index("## Scale") < text.index("## Example view") < text.index("## Faults")


def test_the_fidelity_section_without_engine_runs_says_nothing_is_measured(tmp_path):
    out = sections_module("fidelity").build(Context(tmp_path, tmp_path))
    assert out.key == "fidelity" and "Not measured" in out.sentence and not out.tables


def sections_module(name: str):
    return __import__(f"fleetprobe.analysis.sections.{name}", fromlist=["build"])


# ------------------------------------------------------------------ mechanisms per target


@pytest.fixture()
def live_and_bundled(tmp_path: Path) -> Path:
    """The same Table 3 answers from the bundled paper-state profile and from a live target."""
    write_run(tmp_path, "20260530T120000Z-leakage-seed7", "leakage", leakage_table3(True))
    live = write_run(tmp_path, "20260601T120000Z-leakage-seed7", "leakage",
                     leakage_table3(True), kind="live", profile=None,  # type: ignore[arg-type]
                     started_minute=5)
    manifest = (live / "manifest.json")
    manifest.write_text(manifest.read_text().replace(
        '"server_version": "fixture"', '"server_version": "9.9.9"'))
    return tmp_path


def test_a_live_target_gets_its_own_answers_never_a_profile_sentence(live_and_bundled):
    results = Results.load(live_and_bundled)
    try:
        judged = [v for v in verdict.judge_all(results) if v.claim_id.startswith("table3_")]
    finally:
        results.con.close()
    bundled = [v for v in judged if v.profile == "memclaw-2026-05-30"]
    live = [v for v in judged if v.profile.startswith("live ")]
    assert bundled and live
    # a single probe is below the trials rule: smoke, measured on the live endpoint
    assert any(v.status == verdict.SMOKE_SAME for v in live)
    stated = {text for _, text in basis.STATED.values()}
    for v in live:
        assert not any(text in v.reason for text in stated), v.reason
        assert v.basis == basis.LIVE and v.role == verdict.REPRODUCTION
        if v.status == verdict.SMOKE_SAME:
            assert "answered HTTP 200 x" in v.reason and "no mechanism is known" in v.reason
    by_rule = [v for v in bundled if v.status == verdict.HOLDS]
    assert by_rule and all("GET-by-id checks the tenant only" in v.reason for v in by_rule)
    assert all(v.basis == basis.RULE for v in by_rule)


@pytest.mark.parametrize("kind", ["live", "engine", "backend"])
def test_a_matrix_line_of_a_non_bundled_target_comes_from_its_answer(kind):
    row = SimpleNamespace(profile="backend-mem0" if kind == "backend" else f"{kind} target",
                          target=f"{kind} target", target_kind=kind, path="get",
                          verdict="gap", what="returns the row", count=3,
                          principal="t1 other_fleet", example_status=200.0,
                          op="GET /api/v1/memories/0b7f5c3e-2a5e-4c1e-9d51-7a3f0c2b9e11")
    sentence = matrix.mechanism(row)
    assert matrix.MECHANISM["get"] not in sentence
    assert "answered GET /api/v1/memories/<id> with HTTP 200 (3 probe(s) by t1 other_fleet)" \
        in sentence
    bundled = SimpleNamespace(**{**vars(row), "profile": "memclaw-2026-05-30",
                                 "target_kind": "reference"})
    assert matrix.mechanism(bundled) == matrix.MECHANISM["get"]
