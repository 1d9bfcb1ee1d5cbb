"""Open a DuckDB connection whose views (metrics.sql) read the run traces.

The event columns are every field lib/fleetprobe/EVENTS.md names. Reading with an explicit
column list means an absent field is NULL, an empty events.jsonl gives no rows and a line cut
off by an interrupted run is skipped, so every view works on incomplete or empty runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from fleetprobe.analysis.base.manifests import load_runs, read_manifest
from fleetprobe.harness.trace import COMMON_FIELDS, EVENTS_FILES, events_file, phase_fields

# metrics.sql stays at the package's face: the one file a reviewer audits every metric in
METRICS_SQL = Path(__file__).resolve().parent.parent / "metrics.sql"
# each backend's promise and the rules that judge a backend gap by it (issue 37): its
# `verdict_rules` become the table `backend_promise_rules` the metric views join
PROMISES = METRICS_SQL.parent / "backend_promises_catalogue.yaml"
RULE_FIELDS = ("backend", "deployment", "cause", "path", "visibility", "principal", "sibling",
               "verdict", "basis")
# the paper's configuration (headline_params): its `seed` per experiment becomes the table
# `headline_seeds`, so a view picks the headline seed's run over a repeat on another seed
PAPER_VALUES = METRICS_SQL.parent / "paper_values.yaml"

# DuckDB types of the fields that are not text; every other field EVENTS.md names is VARCHAR.
BOOLEAN_FIELDS = (
    "returned", "leak", "miss", "provisioned", "admitted", "both_admitted", "detected", "stale",
    "complete", "accurate", "depth_faithful", "visible", "flipped",
    "deleted", "cross_tenant", "registered",  # matrix
    "acknowledged", "found", "ok",  # faults
    "applied", "forget",  # dynamics
)
INTEGER_FIELDS = (
    "seq", "status", "attempts", "trust", "write_index", "n_admitted", "active_rows", "hop",
    "depth_planned", "depth_observed", "writes_admitted", "poll_count", "requester_trust",
    "moved",
    "attempt", "step_index", "injected_status", "checked", "violations",  # faults
    "round", "planned_items", "written", "written_count", "n_after",  # dynamics
)
DOUBLE_FIELDS = ("latency_ms", "time_to_visible_ms", "delay_ms", "since_change_ms")
FIELD_TYPES = {
    **dict.fromkeys(BOOLEAN_FIELDS, "BOOLEAN"),
    **dict.fromkeys(INTEGER_FIELDS, "BIGINT"),
    **dict.fromkeys(DOUBLE_FIELDS, "DOUBLE"),
}


def event_columns(experiment: str | None = None) -> dict[str, str]:
    """Every field EVENTS.md names (parsed by the harness's own reader of the contract),
    with the DuckDB type it is read as; with `experiment`, the common fields and that
    experiment's own (all of them for an experiment EVENTS.md does not name)."""
    schema = phase_fields()
    names = list(COMMON_FIELDS)
    for name, phases in schema.items():
        if experiment is not None and experiment in schema and name != experiment:
            continue
        for fields in phases.values():
            names.extend(f for f in fields if f not in names)
    return {name: FIELD_TYPES.get(name, "VARCHAR") for name in names}


def run_dirs(traces_root: Path) -> list[Path]:
    """Run directories under a traces root (a directory holding events.jsonl[.gz] or manifest.json).

    A run directory passed directly as the root counts as a root holding that one run.
    """
    root = Path(traces_root)
    if _is_run_dir(root):
        return [root]
    if not root.is_dir():
        return []
    return sorted(d for d in root.iterdir() if d.is_dir() and _is_run_dir(d))


def _is_run_dir(path: Path) -> bool:
    return any((path / name).is_file() for name in (*EVENTS_FILES, "manifest.json"))


def connect(traces_root: Path, runs: Iterable[Path] | None = None,
            experiments: Collection[str] | None = None) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory connection with `events`, `runs` and every metric view loaded.

    `runs` restricts the connection to chosen run directories; by default every run under
    `traces_root` is read. `experiments` loads the events of those experiments' runs only
    (every manifest is still read, so the choice of canonical runs is the same): a report
    section that reads the leakage views need not parse the matrix's 300k events.
    """
    return load_into(duckdb.connect(":memory:"), traces_root, runs, experiments)


# Views that many report sections read, stored in the shared database file as tables of the
# same name and rows, so each section's process reads them instead of computing them again:
# `runs` counts every event, and the long-form rate table asks 28 views.
SHARED_VIEWS = ("runs", "rate_metrics", "latency_metrics")


def write_database(traces_root: Path, path: Path, parts: Path | None = None) -> None:
    """Every run under traces_root loaded into a DuckDB file with the metric views, for
    processes that each open it read-only (`open_database`) instead of each parsing the
    traces again; the SHARED_VIEWS are computed once, here. `parts`: see `load_into`."""
    con = load_into(duckdb.connect(str(path)), traces_root, parts=parts)
    with ThreadPoolExecutor(max_workers=len(SHARED_VIEWS)) as pool:  # one cursor each
        list(pool.map(lambda view: _store_rows(con.cursor(), view), SHARED_VIEWS))
    for view in SHARED_VIEWS:  # in order: the same catalogue however the threads ran
        con.execute(f"DROP VIEW {view}")
        con.execute(f"ALTER TABLE {view}_rows RENAME TO {view}")
    con.close()


def _store_rows(con: duckdb.DuckDBPyConnection, view: str) -> None:
    try:
        con.execute(f"CREATE TABLE {view}_rows AS SELECT * FROM {view}")
    finally:
        con.close()


def open_database(path: Path) -> duckdb.DuckDBPyConnection:
    return _attach(_quiet(duckdb.connect(str(path), read_only=True)))


def _quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """No progress bar on stderr: the report's output is its files. (In a notebook kernel
    DuckDB refuses to change the setting without ipywidgets, and prints no bar there.)"""
    try:
        con.execute("SET enable_progress_bar = false")
    except duckdb.Error:
        pass
    return con


def load_into(con: duckdb.DuckDBPyConnection, traces_root: Path,
              runs: Iterable[Path] | None = None,
              experiments: Collection[str] | None = None,
              parts: Path | None = None) -> duckdb.DuckDBPyConnection:
    """The runs' events, manifests and the metric views in `con`.

    `parts`: a folder of event databases, one per experiment's set of runs (`part_name`:
    named by the columns and the runs' names and bytes; the caller keeps one folder per
    loader version). The event tables are then those databases, attached (`open_database`
    attaches them again), and only a part not there yet is parsed: parsing and storing the
    events is most of a load, the matrix's 1.5 million rows most of that, and a new run
    changes its own experiment's part alone. Without it the events are parsed into tables
    of `con`."""
    dirs = list(runs) if runs is not None else run_dirs(traces_root)
    manifests = [read_manifest(d) for d in dirs]
    with_events = [d for d, m in zip(dirs, manifests, strict=True)
                   if experiments is None or m.get("experiment") in experiments]
    _quiet(con)
    chosen = set(with_events)
    by_experiment: dict[str | None, list[Path]] = {}
    for d, m in zip(dirs, manifests, strict=True):
        if d in chosen:
            by_experiment.setdefault(m.get("experiment"), []).append(events_file(d))
    groups = {f"events_{i}": (experiment, readable) for i, (experiment, readable) in enumerate(
        ((e, [str(f) for f in g if f.is_file() and f.stat().st_size > 0])
         for e, g in by_experiment.items()), start=1) if readable}
    con.execute(f"CREATE TABLE events_schema ({_column_list(event_columns())})")
    con.execute("CREATE TABLE unreadable_lines (run_dir VARCHAR, lines BIGINT)")
    if parts is not None:
        _attach_parts(con, groups, parts)
    for table, (experiment, _) in groups.items():
        if parts is None:  # filled below, while the metric views are bound
            con.execute(f"CREATE TABLE {table} ({_column_list(event_columns(experiment))})")
    _event_views(con, groups)
    load_runs(con, manifests)
    _load_promise_rules(con)
    _load_headline_seeds(con)
    if parts is not None:
        con.execute(METRICS_SQL.read_text())
        return con
    # The metric views are bound (each expands the wide `events` union)
    # while other threads parse the traces into the tables they read, created empty above.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        # largest first: DuckDB parses the files of one read_json in one thread, and the
        # matrix's alone take as long as all the others
        largest = sorted(groups, key=lambda t: -sum(Path(f).stat().st_size
                                                    for f in groups[t][1]))
        reads = [pool.submit(_read_events, con.cursor(), table, *groups[table])
                 for table in largest]
        con.execute(METRICS_SQL.read_text())
        for future in reads:
            future.result()
    for table in groups:  # in table order: the same bytes however the threads ran
        _drop_unreadable(con, table)
    return con


def _event_views(con: duckdb.DuckDBPyConnection,
                 groups: dict[str, tuple[str | None, list[str]]]) -> None:
    """`events`: a view over one table per experiment (`groups`: {table: (experiment, its
    events files)}), each holding only the fields that experiment's events carry (EVENTS.md:
    the common ones and its own); the view gives every field, in one order, NULL where an
    experiment has none. Parsing and storing a field costs per line whether or not the line
    has it, so each table holds only its experiment's fields."""
    parts = ["events_schema", *groups]
    con.execute("CREATE VIEW events AS " + " UNION ALL BY NAME ".join(
        f"SELECT * FROM {t}" for t in parts))
    for experiment in phase_fields():  # `<experiment>_events`: metrics.sql's header says why
        fields = ", ".join(f'"{name}"' for name in event_columns(experiment))
        con.execute(f"CREATE VIEW {experiment}_events AS SELECT {fields}, run_dir FROM events "
                    f"WHERE experiment = '{experiment}'")


def _attach_parts(con: duckdb.DuckDBPyConnection,
                  groups: dict[str, tuple[str | None, list[str]]], parts: Path) -> None:
    """Each group's events as the part database of its runs (parsed now where no earlier
    load made it), attached read-only, with its unreadable lines; `event_parts` lists them
    for `open_database` and for a cache that keeps the database."""
    paths = {t: parts / part_name(e, fs) for t, (e, fs) in groups.items()}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for future in [pool.submit(_make_part, *groups[t], paths[t]) for t in groups
                       if not paths[t].is_file()]:
            future.result()
    con.execute("CREATE TABLE event_parts (alias VARCHAR, path VARCHAR)")
    for table, path in paths.items():
        os.utime(path)  # used: kept longest
        con.execute("INSERT INTO event_parts VALUES (?, ?)", [f"part_{table}", str(path)])
    _attach(con)
    for table in paths:
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM part_{table}.events")
        con.execute(f"INSERT INTO unreadable_lines SELECT * FROM part_{table}.unreadable_lines")


def part_name(experiment: str | None, files: list[str]) -> str:
    """The part database a group of events files is parsed into: a hash of the columns they
    are read with and each file's run directory name (a column of every row) and bytes."""
    h = hashlib.sha256(json.dumps(event_columns(experiment)).encode())
    for events in files:
        h.update(f"\0{Path(events).parent.name}\0".encode())
        h.update(hashlib.sha256(Path(events).read_bytes()).digest())
    return f"events-{h.hexdigest()[:32]}.duckdb"


def _make_part(experiment: str | None, files: list[str], target: Path) -> None:
    """`files` parsed into a database of their own (table `events`, `unreadable_lines`),
    written beside `target` and renamed: nothing attaches half a part."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
    con = duckdb.connect(str(partial))
    try:
        con.execute(f"CREATE TABLE events ({_column_list(event_columns(experiment))})")
        con.execute("CREATE TABLE unreadable_lines (run_dir VARCHAR, lines BIGINT)")
        _read_events(con.cursor(), "events", experiment, files)
        _drop_unreadable(con, "events")
    finally:
        con.close()
    os.replace(partial, target)
    partial.with_name(partial.name + ".wal").unlink(missing_ok=True)


def _attach(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """The part databases a database's event tables are (`event_parts`), attached."""
    try:
        rows = con.execute("SELECT alias, path FROM event_parts").fetchall()
    except duckdb.CatalogException:  # events stored in the database itself
        return con
    attached = {name for (name,) in con.execute("SELECT database_name FROM duckdb_databases()"
                                                ).fetchall()}
    for alias, path in rows:
        if alias not in attached:
            con.execute(f"ATTACH '{path.replace(chr(39), chr(39) * 2)}' AS {alias} (READ_ONLY)")
    return con


def _column_list(columns: dict[str, str]) -> str:
    """A table's columns: the events' fields, then the run directory they were read from."""
    return ", ".join(f'"{name}" {kind}' for name, kind in columns.items()) + ", run_dir VARCHAR"


# events files (?) parsed with their columns (?), each row with its run directory's name
PARSE_EVENTS = r"""
    SELECT * EXCLUDE (filename),
           regexp_extract(replace(filename, '\', '/'), '([^/]+)/events\.jsonl(\.gz)?$', 1)
               AS run_dir
    FROM read_json(?, format = 'newline_delimited', columns = ?, ignore_errors = true,
                   filename = true)"""


def _read_events(con: duckdb.DuckDBPyConnection, table: str, experiment: str | None,
                 files: list[str]) -> None:
    try:
        con.execute(f"INSERT INTO {table} {PARSE_EVENTS}", [files, event_columns(experiment)])
    finally:
        con.close()


# A line that is not JSON (e.g. cut off mid-write) parses as an all-null row: it is counted,
# so the report can say so, and dropped.
UNREADABLE = "phase IS NULL AND seq IS NULL AND run_id IS NULL"


def _drop_unreadable(con: duckdb.DuckDBPyConnection, table: str) -> None:
    con.execute(f"INSERT INTO unreadable_lines SELECT run_dir, count(*) FROM {table} "
                f"WHERE {UNREADABLE} GROUP BY run_dir")
    con.execute(f"DELETE FROM {table} WHERE {UNREADABLE}")
    # EVENTS.md: run_id is the run directory name; fill it where a writer left it out.
    con.execute(f"UPDATE {table} SET run_id = run_dir WHERE run_id IS NULL")


def _load_promise_rules(con: duckdb.DuckDBPyConnection) -> None:
    """`backend_promise_rules`: the catalogue's verdict rules, numbered in file order (the
    first that matches a gap decides it)."""
    import yaml

    rules = yaml.safe_load(PROMISES.read_text(encoding="utf-8"))["verdict_rules"]
    columns = ", ".join(f"{name} VARCHAR" for name in RULE_FIELDS)
    con.execute(f"CREATE TABLE backend_promise_rules (rule INTEGER, {columns})")
    marks = ", ".join(["?"] * (len(RULE_FIELDS) + 1))
    con.executemany(f"INSERT INTO backend_promise_rules VALUES ({marks})",
                    [[i, *(rule.get(name) for name in RULE_FIELDS)]
                     for i, rule in enumerate(rules, start=1)])


def _load_headline_seeds(con: duckdb.DuckDBPyConnection) -> None:
    """`headline_seeds`: (experiment, seed) for each experiment whose paper configuration
    names a seed (paper_values.yaml headline_params; results.py `_other_seed` reads the same)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    params = yaml.load(PAPER_VALUES.read_text(encoding="utf-8"), Loader=loader).get(
        "headline_params") or {}
    rows = [[name, int(rules["seed"])] for name, rules in params.items()
            if isinstance(rules, dict) and rules.get("seed") is not None]
    con.execute("CREATE TABLE headline_seeds (experiment VARCHAR, seed BIGINT)")
    if rows:
        con.executemany("INSERT INTO headline_seeds VALUES (?, ?)", rows)
