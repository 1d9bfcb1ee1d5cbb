"""Analysis of fleetprobe run traces: DuckDB metric views, statistics, tables, figures and the
paper-versus-reproduction verdict. Everything is computed from data/traces only.

Layers: `base` (traces, metric views, intervals, claims, shared helpers) below `sections`
(one module per experiment or view, each independent of the others) below `build` (which
sections to make again, the processes, what is kept, the one writer) and `html_report`, below
`report`, which composes the registered sections.

Importing the package imports nothing else: an experiment notebook that needs only `db`
should not pay for the report's plotting and statistics stack."""

from typing import Any

__all__ = ["write_summary"]


def __getattr__(name: str) -> Any:
    if name == "write_summary":
        from fleetprobe.analysis.base.summary import write_summary

        return write_summary
    raise AttributeError(f"module 'fleetprobe.analysis' has no attribute {name!r}")
