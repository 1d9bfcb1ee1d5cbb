"""The bottom layer of the analysis: loading traces into DuckDB with the metric views of
metrics.sql (`db`, `results`), Wilson intervals (`stats`), the claims judged against the
paper (`claims`, `basis`, `labels`), and the helpers sections share to write tables, figures
and HTML (`tables`, `figures`, `html`, `section`). Nothing here imports a section or the
report."""
