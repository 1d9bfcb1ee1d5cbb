"""The SQL excerpts shown beside the tables are metrics.sql's own text."""

from __future__ import annotations

from fleetprobe.analysis import report
from fleetprobe.analysis.base import sql_views
from fleetprobe.analysis.base.db import METRICS_SQL
from fleetprobe.analysis.base.tables import Table


def test_every_view_is_read_with_its_statement():
    statements = sql_views.view_statements()
    text = METRICS_SQL.read_text()
    assert len(statements) == text.count("CREATE VIEW ")
    for name, statement in statements.items():
        assert statement in text, name
        assert f"CREATE VIEW {name} AS" in statement and statement.rstrip().endswith(";")


def test_an_excerpt_puts_the_views_read_from_first():
    shown = sql_views.excerpt(["contradiction_write_latency"])
    order = [shown.index(f"CREATE VIEW {v} AS") for v in
             ("contradiction_writes", "contradiction_write_latencies",
              "contradiction_write_latency")]
    assert order == sorted(order)
    assert "not a view of metrics.sql: nope" in sql_views.excerpt(["nope"])


def test_every_table_names_views_metrics_sql_defines(fixture_traces, tmp_path):
    statements = sql_views.view_statements()
    tables = report.build(fixture_traces[0], tmp_path, jobs=1)["tables"].values()
    # the scripted-model tables are views over the recorded probe files, not the traces: their
    # SQL is in sections/backends/model_probes.py (tests/analysis/test_model_probes_report.py)
    own_sql = {"model_probe_findings", "model_probe_verdicts", "model_probe_evidence"}
    for table in (t for t in tables if isinstance(t, Table) and t.name not in own_sql):
        assert table.views, table.name
        assert set(table.views) <= set(statements), table.name
        assert "CREATE VIEW" in sql_views.details_html(table.views)
