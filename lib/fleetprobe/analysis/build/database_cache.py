"""The traces loaded into DuckDB once per distinct set of traces, kept between builds.

Loading the committed traces into the database the sections read is the largest single step
of a build, and sections are remade far more often than a trace changes (after each edit of a
section or a view). So the database `db.write_database` writes is kept in a cache directory
under a name that is a hash of everything it is made from: each run's directory name,
manifest and events bytes, the loader's own source (db.py, manifests.py, trace.py, labels.py,
metrics.sql, EVENTS.md) and DuckDB's version. A changed byte in any of them names another file, so a
cached database is never stale, and the same traces give the same report bytes, cached or
not.

The cache is `$FLEETPROBE_REPORT_CACHE`, else ~/.cache/fleetprobe/report (XDG_CACHE_HOME is
honoured); `FLEETPROBE_REPORT_CACHE=off` loads the traces into the build's scratch directory
every time. The `KEEP` most recently used databases are kept.

The events of each experiment's runs are a database of their own under `parts/<loader
hash>/`, attached by every database made from the same runs (`db.load_into`): after a new
run, the next database parses that experiment's runs alone. A part is kept while a kept
database attaches it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb

from fleetprobe.analysis.base import db, manifests
from fleetprobe.analysis.build.store import cache_dir
from fleetprobe.base import caches, labels
from fleetprobe.harness import trace

KEEP = 3  # about 40 MB each for the committed traces
# each experiment's events, parsed once per set of runs (`db.load_into`'s `parts`), under
# the loader's hash
PARTS = "parts"
# Everything `db.write_database` reads besides the traces: a change to any of these files
# changes what a database holds, so they are part of its name
# (tests/analysis/test_database_cache.py checks that db's imports are all here).
LOADER_SOURCES = (Path(db.__file__), Path(manifests.__file__), Path(trace.__file__),
                  Path(labels.__file__), db.METRICS_SQL, db.PROMISES, db.PAPER_VALUES,
                  trace.EVENTS_MD)
RUN_FILES = ("manifest.json", *trace.EVENTS_FILES)


def database(traces_root: Path, scratch: Path) -> Path:
    """A DuckDB file holding the traces under `traces_root` and the metric views, to open
    read-only: the cached one if these traces were loaded before by this loader, else
    written now (into the cache, or into `scratch` when there is none)."""
    root = cache_dir()
    if root is None:
        return _write(traces_root, scratch / "traces.duckdb")
    path = root / f"traces-{traces_key(traces_root)}.duckdb"
    if _usable(path):
        return path
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: the build still works, without a cache
        return _write(traces_root, scratch / "traces.duckdb")
    # one writer at a time: a build started meanwhile waits here, then finds it made
    with caches.locked(root / ".lock"):
        if _usable(path):
            return path
        for stale in root.glob(".traces-*.partial*"):  # left by a writer that was killed
            stale.unlink(missing_ok=True)
        # written beside its final name and renamed: nothing opens a half-written database
        partial = root / f".{path.name}.{os.getpid()}.partial"
        parts = root / PARTS / loader_key()
        try:
            parts.mkdir(parents=True, exist_ok=True)
            db.write_database(traces_root, partial, parts)  # it attaches `parts`
            os.replace(partial, path)
        finally:
            for leftover in (partial, partial.with_name(partial.name + ".wal")):
                leftover.unlink(missing_ok=True)
        evict(root)
    return path


def loader_key() -> str:
    """A hash of the loader: DuckDB's version and LOADER_SOURCES."""
    return _loader_digest().hexdigest()[:32]


def _loader_digest() -> hashlib._Hash:
    digest = hashlib.sha256(f"duckdb {duckdb.__version__}\n".encode())
    for source in LOADER_SOURCES:
        _add_file(digest, source.name, source)
    return digest


def traces_key(traces_root: Path) -> str:
    """A hash of every input of `db.write_database` for these traces."""
    digest = _loader_digest()
    for run_dir in db.run_dirs(traces_root):
        for name in RUN_FILES:
            _add_file(digest, f"{run_dir.name}/{name}", run_dir / name)
    return digest.hexdigest()[:32]


def _add_file(digest: hashlib._Hash, name: str, path: Path) -> None:
    """The file's name and bytes (or that it is absent), length-prefixed so that no two
    different sets of files give the same stream."""
    data = path.read_bytes() if path.is_file() else None
    digest.update(f"{name}\0{-1 if data is None else len(data)}\0".encode())
    if data:
        digest.update(data)


def _write(traces_root: Path, path: Path) -> Path:
    """A database with no cache to keep it: its parts beside it, for this build."""
    parts = path.with_name(PARTS)
    parts.mkdir(exist_ok=True)
    db.write_database(traces_root, path, parts)
    return path


def _usable(path: Path) -> bool:
    """The database exists and DuckDB opens it (a file cut short by a full disk is loaded
    again rather than failing every section); marked most recently used."""
    if not path.is_file():
        return False
    try:
        db.open_database(path).close()
    except duckdb.Error:
        return False
    if not all(part.is_file() for part in _parts(path)):
        return False  # a part it attaches was removed
    os.utime(path)  # kept longest by `evict`
    return True


def evict(root: Path) -> None:
    """Keep the KEEP most recently used databases and the parts they attach."""
    kept = list(_by_recency(root))
    for stale in kept[KEEP:]:
        stale.unlink(missing_ok=True)
    used = {part for path in kept[:KEEP] for part in _parts(path)}
    for folder in (root / PARTS).glob("*"):
        for part in folder.glob("events-*.duckdb"):
            if part not in used:
                part.unlink(missing_ok=True)
        if not any(folder.iterdir()):
            folder.rmdir()


def _parts(path: Path) -> set[Path]:
    """The part databases a database attaches (none for one holding its own events)."""
    try:
        con = duckdb.connect(str(path), read_only=True)  # not attaching what may be gone
    except duckdb.Error:
        return set()
    try:
        return {Path(p) for (p,) in con.execute("SELECT path FROM event_parts").fetchall()}
    except duckdb.CatalogException:
        return set()
    finally:
        con.close()


def _by_recency(root: Path) -> Iterator[Path]:
    entries = []
    for path in root.glob("traces-*.duckdb"):
        try:
            entries.append((path.stat().st_mtime_ns, path.name, path))
        except FileNotFoundError:  # evicted by another build meanwhile
            continue
    return (path for *_, path in sorted(entries, reverse=True))
