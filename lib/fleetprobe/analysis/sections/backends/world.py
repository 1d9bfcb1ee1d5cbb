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
    "matrix": ("seed", "tenants", "fleets", "enumerate_trusts", "sweeps", "random_probes",
               "cross_tenant_share", "paper_fleets", "paper_agents_per_fleet", "moved_agents"),
    "leakage": ("seed", "fleets", "agents_per_fleet", "variants", "reprobe_fleets",
                "reprobe_rows_per_fleet"),
    "propagation": ("seed", "n_siblings", "n_foreign", "n_rate_facts", "n_window_facts"),
    "provenance": ("seed", "agents", "chains", "depth", "topics"),
    "contradiction": ("seed", "n_facts", "n_writer_agents", "n_templates"),
}
# (not census_row: the rows a target holds are what it could store of the world, e.g. a backend
# has no status lifecycle and answers those writes 501)
SIZE_PHASES: dict[str, tuple[str, ...]] = {
    "matrix": ("census_agent", "probe"),
    "leakage": ("probe",),
}
PLAN = "params/backends-profile-world.yaml"
# the plans that run the bundled profiles on the backends' world, per experiment
SAME_WORLD_PLANS = {"matrix": "params/profiles-backend-world.yaml",
                    "leakage": "params/profiles-backend-world-leakage.yaml"}
SAME_WORLD_PLAN = " and ".join(f"{p} ({e})" for e, p in SAME_WORLD_PLANS.items())
# What a run's manifest params may differ in and still be the same world: the target (what is
# measured: kind, profile, label, store, a bundled server's lifted rate limits) and where the
# run was written. Every other param (seed, world, probe counts, client) must be equal.
NOT_WORLD = ("target", "traces_root", "progress")
# A param an older manifest does not name, with the value that runs what the code of that
# manifest ran (the param came later): the matrix's moved agents came with commit bc0a22f, and
# a matrix run from before it had none.
INTRODUCED: dict[str, dict[str, Any]] = {"matrix": {"moved_agents": False}}


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
    read = recorded if column == "params" else _json
    found = [read(text).get(key) for text in rows[column]]
    found = [v for v in found if v is not None]
    numbers = sorted({v for v in found if isinstance(v, int) and not isinstance(v, bool)})
    if numbers and len(numbers) == len({json.dumps(v) for v in found}):
        return [_fmt(numbers[0]) if len(numbers) == 1
                else f"{_fmt(numbers[0])}-{_fmt(numbers[-1])}"]
    return sorted({_fmt(v) for v in found})


def recorded(params: Any) -> dict[str, Any]:
    """A run's manifest params, with the value of each param its code did not have yet
    (INTRODUCED) where the manifest does not name it."""
    values = _json(params)
    return {**INTRODUCED.get(str(values.get("experiment")), {}), **values}


def world_key(params: Any) -> str:
    """A run's manifest params without what may differ on the same world (NOT_WORLD), as one
    comparable string: two runs ran the same world when their keys are equal."""
    return json.dumps({k: v for k, v in recorded(params).items() if k not in NOT_WORLD},
                      sort_keys=True)


def server_profile(params: Any, label: str) -> str:
    """The bundled profile a run ran (its params' `target.profile`), whatever its label."""
    return str((_json(params).get("target") or {}).get("profile") or label)


def backends_world(results: Results, experiment: str) -> str | None:
    """The world key most of the backends' canonical runs of an experiment share."""
    canonical = results.canonical[results.canonical.experiment == experiment]
    keys = canonical[canonical.profile.map(backend_of).notna()].params.map(world_key)
    return None if keys.empty else str(keys.value_counts().index[0])


def same_world_profiles(results: Results, experiment: str) -> pd.DataFrame:
    """Per bundled profile, its latest complete run of an experiment whose manifest params
    equal the backends' (world_key), whatever its label: the runs a table draws beside the
    backends (params/profiles-backend-world.yaml makes them for the matrix). A `server
    profile` column names the profile; empty when no profile ran the backends' world."""
    key = backends_world(results, experiment)
    runs = results.runs[(results.runs.experiment == experiment) & results.runs.complete
                        & (results.runs.target_kind == "reference")]
    if key is None or runs.empty:
        return runs.iloc[0:0].assign(**{"server profile": pd.Series(dtype=str)})
    runs = runs[runs.params.map(world_key) == key]
    runs = runs.assign(**{"server profile": [server_profile(p, label) for p, label in
                                             zip(runs.params, runs.profile, strict=True)]})
    runs = runs.assign(order=runs.started_at.fillna("") + runs.run_id)
    return (runs.sort_values("order", ascending=False).groupby("server profile", sort=True)
            .head(1).sort_values("server profile").drop(columns="order")
            .reset_index(drop=True))


def profile_runs(results: Results, experiment: str) -> tuple[pd.DataFrame, bool]:
    """The bundled profiles' runs to draw beside the backends, and whether they ran the
    backends' world: the same-world runs where there are any, else the profiles' canonical
    runs (the bundled server's, labelled by their profile: not the engine tier's, nor runs
    with a label of their own)."""
    same = same_world_profiles(results, experiment)
    if not same.empty:
        return same, True
    canonical = results.canonical[(results.canonical.experiment == experiment)
                                  & (results.canonical.target_kind == "reference")]
    canonical = canonical[canonical.profile.map(backend_of).isna()]
    own = pd.Series([server_profile(p, label) == label for p, label in
                     zip(canonical.params, canonical.profile, strict=True)],
                    index=canonical.index, dtype=bool)
    canonical = canonical[own]
    return canonical.assign(**{"server profile": canonical.profile}), False


def world_rows(results: Results, experiment: str) -> pd.DataFrame:
    """One row per world parameter (and executed phase count) of an experiment: its values
    over the backends' canonical runs and over the bundled profiles' runs drawn beside them
    (profile_runs: on the backends' world where they ran it), and whether they differ. Empty
    when either side has no run."""
    canonical = results.canonical[results.canonical.experiment == experiment]
    backends = canonical[canonical.profile.map(backend_of).notna()]
    profiles, _ = profile_runs(results, experiment)
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
        same = same_world_profiles(results, experiment)
        which = (f" ({', '.join(same['server profile'])}: their runs on the backends' world, "
                 f"picked by manifest params; {SAME_WORLD_PLANS.get(experiment, SAME_WORLD_PLAN)})"
                 if not same.empty else "")
        return (f"Same world: the backends' canonical {experiment} runs and the bundled "
                f"profiles' runs drawn beside them{which} have the same world (their "
                "manifests' parameters and executed counts).")
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
