"""Same footing (issue 37, part 2): the world the backends ran beside the world of the bundled
profiles they are drawn beside, read from each canonical run's manifest, so a table or figure
that puts them side by side says where they differ."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections.backends.common import backend_of

# The parameters that make an experiment's world (what is built and how many probes are sent),
# and the phases whose executed counts show its size; any other parameter is configuration.
WORLD_PARAMS: dict[str, tuple[str, ...]] = {
    "matrix": ("tenants", "fleets", "enumerate_trusts", "sweeps", "random_probes",
               "cross_tenant_share", "paper_fleets", "paper_agents_per_fleet"),
    "leakage": ("fleets", "agents_per_fleet", "variants", "reprobe_fleets",
                "reprobe_rows_per_fleet"),
    "propagation": ("n_siblings", "n_foreign", "n_rate_facts", "n_window_facts"),
    "provenance": ("agents", "chains", "depth", "topics"),
    "contradiction": ("n_facts", "n_writer_agents", "n_templates"),
}
SIZE_PHASES: dict[str, tuple[str, ...]] = {
    "matrix": ("census_agent", "census_row", "probe"),
    "leakage": ("probe",),
}
PLAN = "params/backends-profile-world.yaml"


def _json(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) if isinstance(v, list) else str(v) for v in value) + "]"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _values(rows: pd.DataFrame, column: str, key: str) -> list[str]:
    """The distinct values of one world parameter (or executed count) over some runs, as
    shown: `2`, or `200-300` for numbers that vary, else each value."""
    found = [_json(text).get(key) for text in rows[column]]
    found = [v for v in found if v is not None]
    numbers = sorted({v for v in found if isinstance(v, int) and not isinstance(v, bool)})
    if numbers and len(numbers) == len({json.dumps(v) for v in found}):
        return [_fmt(numbers[0]) if len(numbers) == 1
                else f"{_fmt(numbers[0])}-{_fmt(numbers[-1])}"]
    return sorted({_fmt(v) for v in found})


def world_rows(results: Results, experiment: str) -> pd.DataFrame:
    """One row per world parameter (and executed phase count) of an experiment: its values
    over the backends' canonical runs and over the bundled profiles' canonical runs, and
    whether they differ. Empty when either side has no canonical run."""
    canonical = results.canonical[results.canonical.experiment == experiment]
    is_backend = canonical.profile.map(backend_of).notna()
    # the bundled server's profiles (not the engine tier, which has worlds of its own)
    backends = canonical[is_backend]
    profiles = canonical[~is_backend & (canonical.target_kind == "reference")]
    if backends.empty or profiles.empty:
        return pd.DataFrame()
    rows = []
    for key in WORLD_PARAMS.get(experiment, ()):
        rows.append(("parameter", key, _values(backends, "params", key),
                     _values(profiles, "params", key)))
    for phase in SIZE_PHASES.get(experiment, ()):
        rows.append(("events sent", phase, _values(backends, "executed", phase),
                     _values(profiles, "executed", phase)))
    frame = pd.DataFrame(rows, columns=["kind", "name", "backends", "bundled profiles"])
    frame["differs"] = frame.backends != frame["bundled profiles"]
    for side in ("backends", "bundled profiles"):
        frame[side] = frame[side].map(lambda v: ", ".join(v) or "-")
    frame.insert(0, "experiment", experiment)
    return frame


def world_table(results: Results, experiments: tuple[str, ...]) -> pd.DataFrame:
    frames = [world_rows(results, e) for e in experiments]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def world_note(results: Results, experiment: str) -> str:
    """A sentence for a table or figure that draws the backends beside the bundled profiles:
    the same world, or where the worlds differ (values from the canonical runs' manifests)."""
    rows = world_rows(results, experiment)
    if rows.empty:
        return ""
    differ = rows[rows.differs]
    if differ.empty:
        return (f"Same footing: the backends' and the bundled profiles' canonical {experiment} "
                "runs have the same world (their manifests' parameters and executed counts).")
    parts = "; ".join(f"{r['name']} {r['backends']} (profiles: {r['bundled profiles']})"
                      for r in differ.to_dict("records"))
    return (f"Not the same world: the backends' canonical {experiment} runs differ from the "
            f"bundled profiles' in {parts} (from the runs' manifests). Compare rates, not "
            f"counts; {PLAN} is the plan that runs the backends on the profiles' world.")


def footnote(fig: Figure, text: str, width: int = 160) -> None:
    """Draw `text` under a laid-out figure: the figure grows by the note's height and every
    axes keeps its size and place above it (so the note never covers a label)."""
    if not text:
        return
    lines = textwrap.wrap(text, width)
    w, h = fig.get_size_inches()
    extra = 0.11 * len(lines) + 0.12
    fig.set_size_inches(w, h + extra)
    for ax in fig.axes:
        box = ax.get_position()
        ax.set_position([box.x0, (box.y0 * h + extra) / (h + extra), box.width,
                         box.height * h / (h + extra)])
    for artist in fig.texts:  # suptitles: the same distance from the top
        x, y = artist.get_position()
        artist.set_position((x, (y * h + extra) / (h + extra)))
    fig.text(0.01, 0.04 / (h + extra), "\n".join(lines), fontsize=6, va="bottom", ha="left",
             color="0.3")
