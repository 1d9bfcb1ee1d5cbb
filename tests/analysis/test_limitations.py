"""The Limitations section: every limitation says what would settle it, the report renders
each, and README's Limitations section names each (one catalogue, limitations.yaml)."""

from __future__ import annotations

import re
from pathlib import Path

from fleetprobe.analysis.sections.verdict import limitations

README = Path(__file__).resolve().parents[2] / "README.md"
NAMED = ("Embedder", "No language model in the loop", "Loopback latency", "One machine",
         "Engines run with fake providers")


def test_every_limitation_says_what_it_cannot_tell_and_what_would_settle_it():
    items = limitations.load()
    titles = [x["title"] for x in items]
    assert len(set(titles)) == len(titles)
    assert set(NAMED) <= set(titles)
    for x in items:
        assert x["cannot"].strip() and x["settles"].strip(), x["title"]
        assert not re.search(r"\d+(\.\d+)?%", x["cannot"] + x["settles"]), x["title"]


def test_readme_names_every_limitation():
    text = README.read_text()
    section = text[text.index("## Limitations"):]
    section = section[:section.index("\n## ", 3)]
    for x in limitations.load():
        assert f"- {x['title']}" in section, x["title"]


def test_the_report_section_renders_each_and_counts_seeds(results):
    text = limitations.section(results)
    assert text.startswith("## Limitations")
    for x in limitations.load():
        assert x["title"] in text
    assert "Seeds of the complete headline runs" in text and "provenance on" in text
