"""The Limitations section of REPRODUCTION.md, from limitations.yaml, with the seeds of the
committed headline runs counted from the traces (so the page quotes no number it does not
compute)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fleetprobe.analysis.base.results import HEADLINE, REPEAT, Results
from fleetprobe.analysis.base.tables import markdown

LIMITATIONS = Path(__file__).resolve().parents[2] / "limitations.yaml"
PAPER_EXPERIMENTS = ("leakage", "contradiction", "provenance", "propagation", "matrix")


def load(path: Path = LIMITATIONS) -> list[dict[str, Any]]:
    return yaml.safe_load(path.read_text())["limitations"]


def seeds_line(results: Results) -> str:
    """Distinct seeds of the complete headline runs and their repeats (the same
    configuration on other seeds) per experiment, on the profiles the claims name."""
    profiles = {c["profile"] for c in results.claims}
    runs = results.runs[results.runs.role.isin([HEADLINE, REPEAT])
                        & results.runs.complete.astype(bool)
                        & results.runs.profile.isin(list(profiles))]
    parts = []
    for experiment in PAPER_EXPERIMENTS:
        of = runs[runs.experiment == experiment]
        for profile in sorted(set(of.profile)):
            seeds = sorted({int(s) for s in of[of.profile == profile].seed.dropna()})
            parts.append(f"{experiment} on {profile}: {len(seeds)} "
                         f"(seed {', '.join(map(str, seeds))})")
    return "Seeds of the complete headline runs and their repeats in these traces: " + (
        "; ".join(parts) or "none") + "."


def section(results: Results) -> str:
    rows = pd.DataFrame([{"limitation": x["title"], "what the kit cannot tell": x["cannot"],
                          "what would settle it": x["settles"]} for x in load()])
    return "\n".join(["## Limitations", "",
                      "What the evidence above cannot carry, whatever its verdicts say "
                      "(lib/fleetprobe/analysis/limitations.yaml):", "",
                      markdown(rows), "", seeds_line(results)])
