"""Embedder ablation: what changes when the bundled server embeds with a real sentence model
(all-MiniLM-L6-v2, `--embedder minilm`) instead of its offline hashing embedder.

A run with another embedder carries the label `<profile> +<embedder>` (`targets.default_label`),
so it never replaces a hashing-embedder canonical run; this section sets the two labels'
canonical runs side by side on the three measures the embedder can move: search leakage and
misses (which rows clear the similarity cut-off), near-duplicate rejections (the strong-mode
gate is a cosine threshold) and contradiction detection (what the gate leaves the detector).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from fleetprobe.analysis.base.section import REPRODUCTION, Context, Fragment, SectionOutput, finish
from fleetprobe.analysis.base.stats import fmt_count
from fleetprobe.analysis.base.tables import markdown

KEY, TITLE = "embedder", "Embedder ablation"
EXPERIMENTS = ("leakage", "contradiction")

SEPARATOR = " +"
MEASURES: tuple[tuple[str, str, str], ...] = (
    ("leakage", "leakage_search_leak", "search leaks (expected deny)"),
    ("leakage", "leakage_search_miss", "search misses (expected allow)"),
    ("contradiction", "contradiction_both_admitted", "fact-runs with both writes admitted"),
    ("contradiction", "contradiction_detection_all", "contradictions detected"),
)
RUN_HINT = "run `make embed-ablation` (params/embed-ablation.yaml)"


def pairs(results: Any) -> list[tuple[str, str]]:
    """(hashing label, embedder label) for every embedder label whose base label ran too."""
    labels = set(results.canonical.profile.dropna()) if not results.canonical.empty else set()
    return sorted((label.split(SEPARATOR, 1)[0], label) for label in labels
                  if SEPARATOR in label and label.split(SEPARATOR, 1)[0] in labels)


def rows(results: Any) -> pd.DataFrame:
    out = []
    for base, other in pairs(results):
        for experiment, metric, text in MEASURES:
            values = [_rate(results, experiment, label, metric) for label in (base, other)]
            if values == [None, None]:
                continue
            out.append({"profile": base, "embedder label": other, "measure": text,
                        "hashing": fmt_count(values[0]) if values[0] else "-",
                        "semantic": fmt_count(values[1]) if values[1] else "-"})
        near = [_near_duplicates(results, label) for label in (base, other)]
        if near != [None, None]:
            out.append({"profile": base, "embedder label": other,
                        "measure": "near-duplicate rejections (writes)",
                        "hashing": "-" if near[0] is None else str(near[0]),
                        "semantic": "-" if near[1] is None else str(near[1])})
    return pd.DataFrame(out)


def _rate(results: Any, experiment: str, label: str, metric: str) -> Any:
    run = results.canonical_run(experiment, label)
    return None if run is None else results.measured_rate(metric, run.run_id)


def _near_duplicates(results: Any, label: str) -> int | None:
    run = results.canonical_run("contradiction", label)
    if run is None:
        return None
    return results.reject_reasons(run.run_id).get("near_duplicate", 0)


def section(results: Any) -> list[str]:
    """REPRODUCTION.md lines for the embedder ablation."""
    lines = ["## Embedder ablation (hashing versus all-MiniLM-L6-v2)", ""]
    table = rows(results)
    if table.empty:
        return lines + [f"_no runs with a semantic embedder yet: {RUN_HINT}._", ""]
    changed = table[table.hashing != table.semantic]
    summary = ("Unchanged on every measure." if changed.empty else "Changed: " + "; ".join(
        f"{r.measure} ({r.profile}) {r.hashing} -> {r.semantic}" for r in changed.itertuples())
        + ".")
    return lines + ["Canonical runs of each profile with the bundled hashing embedder and "
                    "with the semantic one (its own label, judged like a target above).", "",
                    markdown(table), "", summary, ""]


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        lines = section(results)
        runs = tuple(results.canonical[results.canonical.profile.isin(
            {label for pair in pairs(results) for label in pair})].run_id)
    finally:
        results.con.close()
    output = SectionOutput(
        KEY, TITLE,
        "What changes when the bundled server embeds with a real sentence model "
        "(all-MiniLM-L6-v2) instead of its hashing embedder: search leaks and misses, "
        "near-duplicate rejections and contradiction detection. The table is in "
        "REPRODUCTION.md.",
        fragments=[Fragment(REPRODUCTION, 50, "\n".join(lines))],
        views=tuple(m for _, m, _ in MEASURES), runs=runs)
    return finish(output, context)
