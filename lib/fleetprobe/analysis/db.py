"""Open a DuckDB connection whose views (metrics.sql) read the run traces.

The event columns are every field lib/fleetprobe/EVENTS.md names. Reading with an explicit
column list means an absent field is NULL, an empty events.jsonl gives no rows and a line cut
off by an interrupted run is skipped, so every view works on incomplete or empty runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pandas as pd

from fleetprobe.trace import COMMON_FIELDS, phase_fields

METRICS_SQL = Path(__file__).with_name("metrics.sql")

# DuckDB types of the fields that are not text; every other field EVENTS.md names is VARCHAR.
BOOLEAN_FIELDS = (
    "returned", "leak", "miss", "provisioned", "admitted", "both_admitted", "detected", "stale",
    "complete", "accurate", "depth_faithful", "visible", "flipped",
)
INTEGER_FIELDS = (
    "seq", "status", "attempts", "trust", "write_index", "n_admitted", "active_rows", "hop",
    "depth_planned", "depth_observed", "writes_admitted", "poll_count", "requester_trust",
    "moved",
)
DOUBLE_FIELDS = ("latency_ms", "time_to_visible_ms")
FIELD_TYPES = {
    **dict.fromkeys(BOOLEAN_FIELDS, "BOOLEAN"),
    **dict.fromkeys(INTEGER_FIELDS, "BIGINT"),
    **dict.fromkeys(DOUBLE_FIELDS, "DOUBLE"),
}


def event_columns() -> dict[str, str]:
    """Every field EVENTS.md names (parsed by the harness's own reader of the contract),
    with the DuckDB type it is read as."""
    names = list(COMMON_FIELDS)
    for phases in phase_fields().values():
        for fields in phases.values():
            names.extend(f for f in fields if f not in names)
    return {name: FIELD_TYPES.get(name, "VARCHAR") for name in names}


RUN_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "experiment": "VARCHAR",
    "profile": "VARCHAR",
    "target_kind": "VARCHAR",
    "server_version": "VARCHAR",
    "latency_simulated": "BOOLEAN",
    "seed": "BIGINT",
    "complete": "BOOLEAN",
    "incomplete_reason": "VARCHAR",
    "started_at": "VARCHAR",
    "ended_at": "VARCHAR",
    "params": "VARCHAR",
    "planned": "VARCHAR",
    "executed": "VARCHAR",
    "has_manifest": "BOOLEAN",
}


def run_dirs(traces_root: Path) -> list[Path]:
    """Run directories under a traces root (a directory holding events.jsonl or manifest.json).

    A run directory passed directly as the root counts as a root holding that one run.
    """
    root = Path(traces_root)
    if _is_run_dir(root):
        return [root]
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and _is_run_dir(d))


def _is_run_dir(path: Path) -> bool:
    return _events_file(path).is_file() or (path / "manifest.json").is_file()


def _events_file(run_dir: Path) -> Path:
    """events.jsonl, or events.jsonl.gz for a run committed compressed (the scale runs)."""
    plain = run_dir / "events.jsonl"
    packed = run_dir / "events.jsonl.gz"
    return packed if packed.is_file() and not plain.is_file() else plain


def connect(traces_root: Path, runs: Iterable[Path] | None = None) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory connection with `events`, `runs` and every metric view loaded.

    `runs` restricts the connection to chosen run directories; by default every run under
    `traces_root` is read.
    """
    dirs = list(runs) if runs is not None else run_dirs(traces_root)
    con = duckdb.connect(":memory:")
    _load_events(con, [_events_file(d) for d in dirs])
    _load_runs(con, dirs)
    con.execute(METRICS_SQL.read_text())
    return con


def _load_events(con: duckdb.DuckDBPyConnection, files: list[Path]) -> None:
    readable = [str(f) for f in files if f.is_file() and f.stat().st_size > 0]
    types = event_columns()
    columns = ", ".join(f'"{name}" {kind}' for name, kind in types.items())
    con.execute(f"CREATE TABLE events ({columns}, run_dir VARCHAR)")
    con.execute("CREATE TABLE unreadable_lines (run_dir VARCHAR, lines BIGINT)")
    if not readable:
        return
    con.execute(
        """
        INSERT INTO events
        SELECT * EXCLUDE (filename),
               regexp_extract(replace(filename, '\\', '/'), '([^/]+)/events\\.jsonl(\\.gz)?$',
                              1)
        FROM read_json(?, format = 'newline_delimited', columns = ?,
                       ignore_errors = true, filename = true)
        """,
        [readable, types],
    )
    # A line that is not JSON (e.g. cut off mid-write) parses as an all-null row: count it,
    # so the report can say so, and drop it.
    unreadable = "phase IS NULL AND seq IS NULL AND run_id IS NULL"
    con.execute(f"INSERT INTO unreadable_lines SELECT run_dir, count(*) FROM events "
                f"WHERE {unreadable} GROUP BY run_dir")
    con.execute(f"DELETE FROM events WHERE {unreadable}")
    # EVENTS.md: run_id is the run directory name; fill it where a writer left it out.
    con.execute("UPDATE events SET run_id = run_dir WHERE run_id IS NULL")


def _load_runs(con: duckdb.DuckDBPyConnection, dirs: list[Path]) -> None:
    frame = pd.DataFrame([read_manifest(d) for d in dirs], columns=list(RUN_COLUMNS))
    columns = ", ".join(f'"{name}" {kind}' for name, kind in RUN_COLUMNS.items())
    con.execute(f"CREATE TABLE manifests ({columns})")
    if not frame.empty:
        con.register("manifest_frame", frame)
        con.execute("INSERT INTO manifests SELECT * FROM manifest_frame")
        con.unregister("manifest_frame")


def read_manifest(run_dir: Path) -> dict:
    """The manifest fields the analysis keys on; a missing or unreadable manifest gives nulls."""
    path = Path(run_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict):
        return {"run_id": Path(run_dir).name, "complete": False, "has_manifest": False,
                "incomplete_reason": "manifest.json missing or unreadable"}
    target = manifest.get("target") or {}
    return {
        "run_id": manifest.get("run_id") or Path(run_dir).name,
        "experiment": manifest.get("experiment"),
        "profile": target.get("server_profile"),
        "target_kind": target.get("kind"),
        "server_version": _as_text(target.get("server_version")),
        "latency_simulated": target.get("latency_simulated"),
        "seed": manifest.get("seed"),
        "complete": bool(manifest.get("complete")),
        "incomplete_reason": manifest.get("incomplete_reason"),
        "started_at": manifest.get("started_at"),
        "ended_at": manifest.get("ended_at"),
        "params": json.dumps(manifest.get("params") or {}, sort_keys=True),
        "planned": json.dumps(manifest.get("planned") or {}, sort_keys=True),
        "executed": json.dumps(manifest.get("executed") or {}, sort_keys=True),
        "has_manifest": True,
    }


def _as_text(value: object) -> str | None:
    return None if value is None else str(value)
