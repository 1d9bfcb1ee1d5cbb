"""One run's headline metrics as summary.csv, through the same views as the report."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd

from fleetprobe.analysis import db
from fleetprobe.analysis.stats import wilson

SUMMARY_COLUMNS = ["metric", "numerator", "denominator", "value", "ci_low", "ci_high"]
PERCENTILES = ("p50", "p95", "p99", "max")


def rate_table(con) -> pd.DataFrame:
    """Every rate view in long form with value and Wilson interval."""
    frame = con.execute("SELECT * FROM rate_metrics ORDER BY run_id, metric").df()
    intervals = [wilson(int(k), int(n)) for k, n in zip(frame.numerator, frame.denominator,
                                                       strict=True)]
    frame["value"] = [k / n if n else math.nan for k, n in zip(frame.numerator,
                                                              frame.denominator, strict=True)]
    frame["ci_low"] = [low for low, _ in intervals]
    frame["ci_high"] = [high for _, high in intervals]
    return frame


def latency_table(con) -> pd.DataFrame:
    """Every latency view in long form (n, p50, p95, p99, max in ms)."""
    return con.execute("SELECT * FROM latency_metrics ORDER BY run_id, metric").df()


def summary_rows(con) -> list[dict]:
    """summary.csv rows: rates with intervals, then one row per latency percentile."""
    rows = [
        _row(_metric_name(r), r.numerator, r.denominator, r.value, r.ci_low, r.ci_high)
        for r in rate_table(con).itertuples()
    ]
    for r in latency_table(con).itertuples():
        for pct in PERCENTILES:
            rows.append(_row(_metric_name(r, f"_{pct}_ms"), None, r.n, getattr(r, pct)))
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
