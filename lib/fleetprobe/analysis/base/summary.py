"""One run's headline metrics as summary.csv, through the same views as the report.

A row is a metric view of metrics.sql (`leakage_search_leak`, ...); a latency view gives one
row per percentile (`provenance_hop_latency_p95_ms`, numerator empty, denominator = n). A
leakage metric is measured per search-leak variant, so its name ends in
`[variant_write/variant_search]`.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import duckdb
import pandas as pd

from fleetprobe.analysis.base import db
from fleetprobe.analysis.base.stats import rate

SUMMARY_COLUMNS = ["metric", "numerator", "denominator", "value", "ci_low", "ci_high"]
PERCENTILES = ("p50", "p95", "p99", "max")


# A total order, so the same traces always give byte-identical tables and REPRODUCTION.md.
STABLE_ORDER = "run_id, metric, variant_write NULLS FIRST, variant_search NULLS FIRST"


def rate_table(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every rate view in long form with value and Wilson interval."""
    frame = con.execute(f"SELECT * FROM rate_metrics ORDER BY {STABLE_ORDER}").df()
    rates = [rate(int(k), int(n)) for k, n in zip(frame.numerator, frame.denominator,
                                                  strict=True)]
    frame["value"] = [r.value for r in rates]
    frame["ci_low"] = [r.low for r in rates]
    frame["ci_high"] = [r.high for r in rates]
    return frame


def latency_table(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every latency view in long form (n, p50, p95, p99, max in ms)."""
    return con.execute(f"SELECT * FROM latency_metrics ORDER BY {STABLE_ORDER}").df()


def summary_rows(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """summary.csv rows: rates with intervals, then one row per latency percentile."""
    rows = [
        _row(_metric_name(r), r.numerator, r.denominator, r.value, r.ci_low, r.ci_high)
        for r in rate_table(con).itertuples()
    ]
    for r in latency_table(con).itertuples():
        for pct in PERCENTILES:
            rows.append(_row(_metric_name(r, f"_{pct}_ms"), None, r.n, getattr(r, pct)))
    # the separation experiment's rates (metrics.sql, separation section)
    for metric, k, n in con.execute("SELECT metric, numerator, denominator FROM "
                                    "separation_rate_metrics ORDER BY run_id, metric").fetchall():
        r = rate(int(k), int(n))
        rows.append(_row(metric, k, n, r.value, r.low, r.high))
    for metric, k, n in matrix_rate_rows(con):  # the governance matrix (beyond the paper)
        x = rate(k, n)
        rows.append(_row(metric, k, n, x.value, x.low, x.high))
    return rows


def write_summary(run_dir: Path) -> Path:
    """Write <run_dir>/summary.csv from the run's events and return its path.

    Works on an incomplete run (what was measured so far) and on an empty one (header only).
    """
    run_dir = Path(run_dir)
    con = db.connect(run_dir, runs=[run_dir])
    try:
        rows = summary_rows(con)
    finally:
        con.close()
    path = run_dir / "summary.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _metric_name(row, suffix: str = "") -> str:
    """The metric name, followed by the leakage variant when the row carries one."""
    variants = [v for v in (row.variant_write, row.variant_search) if isinstance(v, str)]
    name = row.metric + suffix
    return f"{name}[{'/'.join(variants)}]" if variants else name


def _row(metric, numerator, denominator, value, low=None, high=None) -> dict:
    return {
        "metric": metric,
        "numerator": "" if numerator is None else int(numerator),
        "denominator": "" if denominator is None else int(denominator),
        "value": _fmt(value),
        "ci_low": _fmt(low),
        "ci_high": _fmt(high),
    }


def _fmt(number) -> str:
    if number is None or (isinstance(number, float) and math.isnan(number)):
        return ""
    return f"{float(number):.6g}"


def matrix_rate_rows(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, int]]:
    """(metric, numerator, denominator) of every matrix run in `con`, for summary.csv."""
    rows: list[tuple[str, int, int]] = []
    for r in con.execute("SELECT * FROM matrix_summary ORDER BY run_id").df().itertuples():
        judged = int(r.probes - r.not_applicable - r.errors)
        rows += [("matrix_gap_rate", int(r.gaps), judged),
                 ("matrix_miss_rate", int(r.misses), judged),
                 ("matrix_cross_tenant_success", int(r.cross_tenant_successes),
                  int(r.cross_tenant_probes))]
    paper = con.execute("SELECT * FROM matrix_paper_rates ORDER BY run_id, metric").df()
    names = {"tenant-key GET exposure (expected deny)": "matrix_paper_get_exposure",
             "tenant-key GET miss (expected allow)": "matrix_paper_get_miss",
             "search leak rate (expected deny)": "matrix_paper_search_leak",
             "search miss rate (expected allow)": "matrix_paper_search_miss"}
    rows += [(names[r.metric], int(r.numerator), int(r.denominator))
             for r in paper.itertuples()]
    return rows
