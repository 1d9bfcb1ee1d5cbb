"""Analysis of fleetprobe run traces: DuckDB metric views, statistics, tables, figures and the
paper-versus-reproduction verdict. Everything is computed from data/traces only."""

from fleetprobe.analysis.summary import write_summary

__all__ = ["write_summary"]
