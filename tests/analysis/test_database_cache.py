"""The traces' database kept between report builds (build/database_cache.py): the same report
cached or not, a new database for any changed input, never a half-written or stale one."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fleetprobe.analysis import report
from fleetprobe.analysis.base import db
from fleetprobe.analysis.build import database_cache, store


def count_loads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    loads: list[Path] = []
    write = db.write_database

    def counted(traces_root: Path, path: Path, parts: Path | None = None) -> None:
        loads.append(path)
        write(traces_root, path, parts)

    monkeypatch.setattr(db, "write_database", counted)
    return loads


def report_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file()}


def test_a_cached_database_gives_the_same_report_bytes(traces, cache, tmp_path, monkeypatch):
    loads = count_loads(monkeypatch)
    built = report.build(traces, tmp_path / "out" / "cold", jobs=1)
    report.build(traces, tmp_path / "out" / "warm", jobs=1)
    assert len(loads) == 1, "the second build loaded the traces again"
    name = f"traces-{database_cache.traces_key(traces)}.duckdb"
    # no partial file left
    assert sorted(p.name for p in cache.iterdir() if p.is_file()) == [".lock", name]
    monkeypatch.setenv(store.ENV_CACHE, "off")
    report.build(traces, tmp_path / "out" / "uncached", jobs=1)
    assert len(loads) == 2 and cache not in loads[1].parents
    cold = report_files(tmp_path / "out" / "cold")
    assert cold and cold == report_files(tmp_path / "out" / "warm")
    assert cold == report_files(tmp_path / "out" / "uncached")
    # a run taken away: the next build loads the traces again and no longer has it
    monkeypatch.setenv(store.ENV_CACHE, str(cache))
    victim = next(d for d in db.run_dirs(traces)
                  if db.read_manifest(d)["run_id"] in set(built["canonical"].run_id))
    shutil.rmtree(victim)
    again = report.build(traces, tmp_path / "out" / "fewer", jobs=1)
    assert len(loads) == 3 and victim.name not in set(again["canonical"].run_id)
    assert len(list(cache.glob("traces-*.duckdb"))) == 2


def test_any_changed_input_names_another_database(traces):
    run = db.run_dirs(traces)[0]
    keys = {database_cache.traces_key(traces)}
    assert database_cache.traces_key(traces) in keys  # the same traces, the same name
    events = db.events_file(run)
    events.write_bytes(events.read_bytes() + b'{"phase": "x"}\n')
    keys.add(database_cache.traces_key(traces))
    manifest = run / "manifest.json"
    manifest.write_text(manifest.read_text().replace("{", '{"note": 1, ', 1))
    keys.add(database_cache.traces_key(traces))
    run.rename(run.with_name(run.name + "-renamed"))
    keys.add(database_cache.traces_key(traces))
    shutil.rmtree(db.run_dirs(traces)[-1])
    keys.add(database_cache.traces_key(traces))
    assert len(keys) == 5


def test_the_loader_sources_cover_every_module_the_loader_imports():
    """A module db.py imports (and what it imports in turn) shapes the database: its source
    must be in the name, or editing it would leave old databases looking current."""
    covered = {p.resolve() for p in database_cache.LOADER_SOURCES}
    seen: set[str] = set()
    pending = ["fleetprobe.analysis.base.db"]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        origin = Path(importlib.util.find_spec(name).origin).resolve()
        assert origin in covered, f"{name} ({origin}) shapes the database but is not hashed"
        pending += [m for m in module_imports(origin) if m.startswith("fleetprobe")
                    and not Path(importlib.util.find_spec(m).origin).name == "__init__.py"]
    assert seen >= {"fleetprobe.analysis.base.db", "fleetprobe.harness.trace",
                    "fleetprobe.base.labels"}


def module_imports(path: Path) -> list[str]:
    """The modules a file imports when it is loaded (not under TYPE_CHECKING, not in a
    function: those run only when called, and the loader's calls are in db.py itself)."""
    names = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}")
                      else node.module for a in node.names]
    return names


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def test_an_unreadable_cached_database_is_loaded_again(traces, cache, tmp_path):
    cache.mkdir()
    broken = cache / f"traces-{database_cache.traces_key(traces)}.duckdb"
    broken.write_bytes(b"not a database")
    path = database_cache.database(traces, tmp_path)
    assert path == broken and db.open_database(path).execute(
        "SELECT count(*) FROM runs").fetchone()[0] == len(db.run_dirs(traces))


def test_the_most_recently_used_databases_are_kept(cache):
    cache.mkdir()
    for age in range(database_cache.KEEP + 2):
        path = cache / f"traces-{age}.duckdb"
        path.write_bytes(b"")
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    (cache / "unrelated.txt").write_text("kept")
    database_cache.evict(cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [f"traces-{age}.duckdb" for age in range(database_cache.KEEP)] + ["unrelated.txt"])


def test_off_keeps_nothing(traces, cache, tmp_path, monkeypatch):
    monkeypatch.setenv(store.ENV_CACHE, "off")
    path = database_cache.database(traces, tmp_path)
    assert path.parent == tmp_path and not cache.exists()


def test_builds_at_the_same_time_load_the_traces_once(traces, cache, tmp_path, monkeypatch):
    """Builds started side by side (two notebooks, a test run beside `make report`): whichever
    comes second waits for the first and opens what it wrote. A writer killed half way left a
    partial file."""
    cache.mkdir()
    (cache / ".traces-0.duckdb.1.partial").write_bytes(b"killed half way")
    loads = count_loads(monkeypatch)
    with ThreadPoolExecutor(max_workers=3) as pool:
        paths = list(pool.map(lambda i: database_cache.database(traces, tmp_path / str(i)),
                              range(3)))
    assert len(loads) == 1 and len(set(paths)) == 1
    assert sorted(p.name for p in cache.iterdir()) == [".lock", database_cache.PARTS,
                                                        paths[0].name]


def parts_of(cache: Path) -> set[str]:
    return {p.name for p in (cache / database_cache.PARTS).rglob("events-*.duckdb")}


def test_a_new_run_parses_its_own_experiment_alone(traces, cache, tmp_path):
    """Each experiment's events are a part database of their own: after a new run, the next
    database makes one new part (that run's experiment) and attaches the others it had."""
    first = database_cache.database(traces, tmp_path)
    before = parts_of(cache)
    experiments = {db.read_manifest(d)["experiment"] for d in db.run_dirs(traces)}
    assert len(before) == len(experiments) > 1
    run = next(d for d in db.run_dirs(traces) if db.read_manifest(d)["experiment"] == "leakage")
    copy = Path(shutil.copytree(run, traces / f"{run.name}-again"))
    second = database_cache.database(traces, tmp_path)
    assert second != first and len(parts_of(cache) - before) == 1
    count = "SELECT count(*) FROM leakage_events WHERE run_dir = ?"
    with db.open_database(first) as old, db.open_database(second) as new:
        rows = old.execute(count, [run.name]).fetchone()[0]
        assert rows > 0 and new.execute(count, [copy.name]).fetchone()[0] == rows
        assert old.execute(count, [copy.name]).fetchone()[0] == 0
        assert new.execute("SELECT count(*) FROM runs").fetchone()[0] == len(
            db.run_dirs(traces))
    shutil.rmtree(copy)
    assert database_cache.database(traces, tmp_path) == first  # kept, with its parts


def test_a_database_whose_part_is_gone_is_made_again(traces, cache, tmp_path):
    path = database_cache.database(traces, tmp_path)
    victim = sorted((cache / database_cache.PARTS).rglob("events-*.duckdb"))[0]
    victim.unlink()
    assert database_cache.database(traces, tmp_path) == path and victim.is_file()


def test_parts_no_kept_database_attaches_are_removed(traces, cache, tmp_path):
    database_cache.database(traces, tmp_path)
    stray = next((cache / database_cache.PARTS).iterdir()) / "events-stray.duckdb"
    stray.write_bytes(b"")
    old_loader = cache / database_cache.PARTS / ("0" * 32)
    old_loader.mkdir()
    (old_loader / "events-old.duckdb").write_bytes(b"")
    kept = parts_of(cache) - {"events-stray.duckdb", "events-old.duckdb"}
    database_cache.evict(cache)
    assert parts_of(cache) == kept and not old_loader.exists()
