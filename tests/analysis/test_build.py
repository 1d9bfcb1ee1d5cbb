"""The build room: a section is made again only when its inputs changed, kept outputs give
the same bytes, the writer rewrites only what differs, and `make report`'s currency check
starts nothing when every file is current."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetprobe.analysis import report, sections
from fleetprobe.analysis.base import db
from fleetprobe.analysis.build import inputs, runner, stamp, store, writer


def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sections a build makes (in this process: jobs=1)."""
    keys: list[str] = []
    build_section = runner.build_section

    def counted(key, context):
        keys.append(key)
        return build_section(key, context)

    monkeypatch.setattr(runner, "build_section", counted)
    return keys


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def test_nothing_changed_makes_nothing_and_gives_the_same_bytes(traces, cache, tmp_path,
                                                                 monkeypatch):
    keys = made(monkeypatch)
    out = tmp_path / "out"
    report.build(traces, out, jobs=1)
    assert keys == list(sections.REGISTRY)
    first = files(out)
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    keys.clear()
    report.build(traces, out, jobs=1)
    assert keys == []
    assert files(out) == first
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes  # nothing rewritten


def test_a_changed_run_remakes_only_the_sections_that_read_it(traces, cache, tmp_path,
                                                              monkeypatch):
    keys = made(monkeypatch)
    out = tmp_path / "out"
    report.build(traces, out, jobs=1)
    run = next(d for d in db.run_dirs(traces) if db.read_manifest(d)["experiment"] ==
               "propagation")
    manifest = run / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "note": "edited"}))
    keys.clear()
    report.build(traces, out, jobs=1)
    expected = [k for k, s in sections.REGISTRY.items()
                if s.experiments is None or "propagation" in s.experiments]
    assert keys == expected and "matrix" not in keys and "verdict" in keys
    # the same bytes as a build that kept nothing
    monkeypatch.setenv(store.ENV_CACHE, "off")
    report.build(traces, tmp_path / "fresh", jobs=1)
    assert files(out) == files(tmp_path / "fresh")


def test_a_build_of_kept_sections_imports_no_drawing_library(traces, cache, tmp_path):
    """Drawing is for the sections' processes: the composing one (the notebook's kernel)
    unpickles kept outputs, figures and section objects included, without matplotlib or
    seaborn (about 1.2 CPU-s of a one-new-run build)."""
    out = tmp_path / "out"
    report.build(traces, out, jobs=1)
    code = ("import sys; from fleetprobe.analysis import report; "
            f"built = report.build({str(traces)!r}, {str(out)!r}, jobs=1); "
            "assert built['separation'] is not None; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'seaborn')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=os.environ, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_every_data_file_of_the_analysis_is_in_every_sections_key():
    """A catalogue, rule file or SQL beside the sections is read by them: a change to one must
    make every section again (the promises catalogue was once left out of a hand list)."""
    hashed = set(inputs.shared_files())
    data = {f for f in inputs.ANALYSIS.iterdir() if f.is_file() and f.suffix != ".py"}
    assert data and data <= hashed
    assert inputs.ANALYSIS / "backend_promises_catalogue.yaml" in hashed


def test_the_writer_rewrites_only_what_differs_and_drops_stale_figures(tmp_path):
    out = tmp_path / "out"
    writer.write(out, {"a.md": b"one", "figures/x.png": b"png"})
    (out / "figures" / "old.pdf").write_bytes(b"left by an older build")
    os.utime(out / "a.md", ns=(1, 1))
    changed = writer.write(out, {"a.md": b"one", "figures/y.png": b"new"})
    assert changed == [out / "figures/y.png"]
    assert (out / "a.md").stat().st_mtime_ns == 1
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["y.png"]


def test_a_table_that_shrank_below_its_split_keeps_no_old_parts(tmp_path):
    out = tmp_path / "out"
    writer.write(out, {"tables/t/part-01.csv": b"a", "tables/t/part-02.csv": b"b",
                       "matrix/x.md": b"page", "notes.txt": b"kept"})
    writer.write(out, {"tables/t.csv": b"ab"})
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "matrix", "notes.txt", "tables", "tables/t.csv"]


def test_the_stamp_is_current_until_a_file_or_an_input_changes(cache, tmp_path):
    out = tmp_path / "out"
    writer.write(out, {"a.md": b"one"})
    stamp.record_files(out, ["a.md"])
    notebook = out / "report.ipynb"
    notebook.write_text("{}")
    stamp.record(out, "key", notebook)
    assert stamp.current(out, "key")
    assert not stamp.current(out, "another key")
    (out / "a.md").write_bytes(b"edited")
    assert not stamp.current(out, "key")
    (out / "a.md").write_bytes(b"one")
    notebook.unlink()
    assert not stamp.current(out, "key")


def test_the_notebook_key_follows_the_traces_and_the_notebook(traces, tmp_path):
    source = tmp_path / "report.ipynb"
    source.write_text("{}")
    parameters = {"traces_root": str(traces), "out_dir": str(tmp_path / "out")}
    key = stamp.notebook_key(source, parameters)
    assert stamp.notebook_key(source, parameters) == key
    source.write_text('{"cells": []}')
    assert stamp.notebook_key(source, parameters) != key
    key = stamp.notebook_key(source, parameters)
    shutil.rmtree(db.run_dirs(traces)[0])
    assert stamp.notebook_key(source, parameters) != key
