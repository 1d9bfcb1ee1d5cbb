"""html.frame_html writes a table as pandas' to_html does, and leaves other frames to it."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from fleetprobe.analysis.base.html import blank_missing, frame_html

# the characters pandas escapes, strips or shows as escapes, and some it leaves alone
ALPHABET = list("ab 7.-/%_") + ["\t", "\n", "\r", "&", "<", ">", '"', "'", "\\", "\x0b",
                                "\u00a0", "é", "·", "≤", "&amp;", "  "]


def _pandas(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, escape=True, border=0, classes="data")


PLAIN = [c for c in ALPHABET if c not in "\t\n\r"]


def _text(rng: random.Random, alphabet: list[str] = ALPHABET) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


@pytest.mark.parametrize("seed", range(40))
def test_text_int_and_bool_cells_are_written_as_pandas_writes_them(seed, monkeypatch):
    """Odd seeds put line breaks and tabs in the cells (pandas writes those tables)."""
    rng = random.Random(seed)
    alphabet = ALPHABET if seed % 2 else PLAIN
    rows = rng.randint(1, 8)
    columns = [f"c{i} {_text(rng)}" for i in range(rng.randint(1, 5))]
    data = {}
    for column in columns:
        kind = rng.choice(["text", "int", "bool", "mixed"])
        data[column] = [
            _text(rng, alphabet) if kind == "text" else rng.randint(-10**6, 10**6)
            if kind == "int" else rng.random() < 0.5 if kind == "bool"
            else rng.choice([_text(rng, alphabet), rng.randint(0, 99), True])
            for _ in range(rows)]
    frame = pd.DataFrame(data).astype(object)
    expected = _pandas(frame)
    if seed % 2 == 0:
        monkeypatch.setattr(pd.DataFrame, "to_html", _only_without_rows)
    assert frame_html(frame) == expected


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"x": [0.5, 1.25]}).astype(object),  # floats: pandas' float format
    pd.DataFrame({"x": ["a", None]}).astype(object),
    pd.DataFrame({"x": [np.int64(3), pd.NA]}, dtype=object),
    pd.DataFrame({1: ["a"], 2: ["b"]}).astype(object),  # column names that are not text
    pd.DataFrame({"x": ["a\nb", "c"], "y": [1, 2]}).astype(object),  # a line break
    pd.DataFrame({"x": ["a"], "y": ["b"]}).rename_axis(columns="named"),  # a pivot's head
    pd.DataFrame([["a", "b"]], columns=pd.MultiIndex.from_tuples([("x", "1"), ("x", "2")])),
])
def test_other_frames_are_pandas_own(frame):
    assert frame_html(frame) == _pandas(frame)


def test_the_report_tables_rows_are_written_here(monkeypatch):
    frame = pd.DataFrame({"a  b": ["x  & <y>", " 3/4 "], "n": [1, -20], "ok": [True, False]})
    expected = _pandas(frame.astype(object))
    monkeypatch.setattr(pd.DataFrame, "to_html", _only_without_rows)
    assert frame_html(frame.astype(object)) == expected


def _only_without_rows(self, **kwargs):
    assert self.empty, "pandas wrote the rows"
    return _ORIGINAL_TO_HTML(self, **kwargs)


_ORIGINAL_TO_HTML = pd.DataFrame.to_html


def test_blank_missing_gives_what_pandas_where_gives():
    """Every kind of column a report table has, with missing cells: the same objects as
    `astype(object).where(notna, "")`, in object columns."""
    frame = pd.DataFrame({
        "rate": [0.5, np.nan, 1.0], "text": ["a", None, "c"],
        "count": pd.array([1, None, 3], dtype="Int64"), "flag": [True, False, True],
        "when": pd.to_datetime(["2026-05-30", None, "2026-05-31"]),
        "maybe": pd.array([True, None, False], dtype="boolean")}, index=[4, 5, 6])
    expected = frame.astype(object).where(pd.notna(frame), "")
    got = blank_missing(frame)
    assert got.equals(expected)
    assert got.dtypes.tolist() == expected.dtypes.tolist()
    assert [type(v) for v in got.to_numpy().ravel()] == \
        [type(v) for v in expected.to_numpy().ravel()]
