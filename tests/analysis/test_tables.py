"""The table writers give tabulate's own text (Markdown as pandas' to_markdown writes it,
LaTeX as tabulate's latex_booktabs), and a table's files are its csv, md and tex."""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest
from tabulate import tabulate

from fleetprobe.analysis.base.tables import Table, escape_latex, latex, markdown

# every kind of column a report table has: formatted text, numbers written as text (tabulate
# parses and right-aligns them), real numbers, missing cells, bools, LaTeX's specials
MIXED = pd.DataFrame({
    "claim": ["leak_rate", "p50 <= 5 ms", "50% & more_{x}", None],
    "k/n": ["3/40 (7.5%)", "", "12/12", "0/0"],
    "numeric text": ["1", "2.50", "1,000", "-3e2"],
    "count": [1, 20, 300, 4000],
    "value": [0.5, math.nan, 1.25, 10.0],
    "flag": [True, False, True, False],
    "text flags": ["True", "False", "True", "x"],
    "specials": ["~\\^#$", "<a>", "{b}", "%"],
    "nullable": pd.array([1, None, 3, 4], dtype="Int64"),  # <NA> reads as text
})


@pytest.mark.parametrize("frame", [
    MIXED,
    MIXED.astype({"claim": "str", "k/n": "str"}),  # pandas' string dtype, NaN for None
    MIXED.iloc[0:0],
    MIXED[["count", "value"]],
    MIXED[["numeric text"]],
])
def test_markdown_and_latex_are_tabulates_text(frame):
    assert markdown(frame) == frame.to_markdown(index=False)
    tabular = tabulate(frame, headers="keys", tablefmt="latex_booktabs", showindex=False)
    assert latex(frame, "A & B", "tab:x") == (
        f"\\begin{{table}}\n\\caption{{A \\& B}}\n\\label{{tab:x}}\n{tabular}\n\\end{{table}}\n")


def test_markdown_takes_the_headers_given():
    frame = MIXED[["claim", "count"]]
    assert markdown(frame, headers=["a", "b"]) == frame.to_markdown(index=False,
                                                                     headers=["a", "b"])


def test_escape_latex_escapes_as_tabulate_does():
    text = "a_b & 50% {x} ~ \\ ^ # $ <y>"
    tabular = tabulate([[text]], tablefmt="latex_booktabs")
    assert escape_latex(text) in tabular


def test_a_tables_files_are_its_formats():
    table = Table("t", "A title", MIXED[["count", "value"]], note="a note")
    files = table.files()
    assert sorted(files) == ["tables/t.csv", "tables/t.md", "tables/t.tex"]
    assert files["tables/t.csv"].decode() == MIXED[["count", "value"]].to_csv(index=False)
    assert files["tables/t.md"].decode().startswith("## A title\n\n|")
    assert Table("t", "t", MIXED, formats=("csv",)).files().keys() == {"tables/t.csv"}
    empty = Table("e", "Empty", MIXED.iloc[0:0], note="nothing yet").files()
    assert empty["tables/e.tex"] == b"% nothing yet\n"


def test_a_long_table_shows_its_first_rows_and_names_its_csv():
    from fleetprobe.analysis.base import tables

    long = pd.DataFrame({"target": ["a"] * 400 + ["b"] * 400,
                         "text": [f"row {i} " + "x" * 40 for i in range(800)]})
    table = Table("long", "Long", long)
    assert table.long and len(table.shown) == tables.SHOWN_ROWS
    assert "every row: `tables/long.csv`" in table.markdown
    assert table.markdown.count("\n| ") == tables.SHOWN_ROWS  # rows after the separator
    short = Table("short", "Short", long.head(5))
    assert not short.long and short.markdown == markdown(long.head(5))
    assert f"first {tables.SHOWN_ROWS} of 800 rows" in table.files()["tables/long.tex"].decode()


def test_a_csv_over_the_page_limit_is_written_in_parts_each_under_it(monkeypatch):
    from fleetprobe.analysis.base import tables

    monkeypatch.setattr(tables, "PAGE_LIMIT", 4_000)
    frame = pd.DataFrame({"target": ["a[x,1]"] * 150 + ["b"] * 20,
                          "text": [f"row {i}, \"quoted\"\nline" for i in range(170)]})
    files = tables.csv_files(frame, "big", split_by="target")
    listed = pd.read_csv(io.BytesIO(files["tables/big.csv"]))
    assert all(len(data) <= 4_000 for data in files.values())
    assert listed.rows.sum() == len(frame) and set(listed.part) == {"a[x,1]", "b"}
    parts = [pd.read_csv(io.BytesIO(files[f"tables/{f}"])) for f in listed.file]
    assert pd.concat(parts, ignore_index=True).equals(frame)
    assert "tables/big/b.csv" in files and "tables/big/a-x-1-01.csv" in files
    small = tables.csv_files(frame.head(3), "small")
    assert list(small) == ["tables/small.csv"]
