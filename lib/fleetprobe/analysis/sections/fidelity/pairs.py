"""Which runs are compared: each engine commit beside the bundled profile that stands for it
(`paper_values.yaml` `fidelity.pairs`), run for run with the same params apart from the
target, and whether a pair's world is the one the profile's choices were fitted on
(`fidelity.fitted`) or one it was not (held out).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

# params that say how a run was made, not what it measured
RUN_KEYS = ("target", "traces_root", "progress", "client")
_COMMIT_IN_LABEL = re.compile(r"@ ([0-9a-f]{7,40})\b")


@dataclass(frozen=True)
class Pair:
    profile_run: pd.Series
    engine_run: pd.Series
    profile: str  # the bundled profile
    commit: str  # the engine's short commit
    fitted: bool  # the profile's choices may have been read off this world and seed

    @property
    def name(self) -> str:
        return f"{self.profile} vs {self.commit}"


def world(params: str | None) -> str:
    doc = json.loads(params or "{}")
    return json.dumps({k: v for k, v in doc.items() if k not in RUN_KEYS}, sort_keys=True)


def profile_of(params: str | None) -> str | None:
    return (json.loads(params or "{}").get("target") or {}).get("profile")


def same_world(params: str | None, other: str | None, profile: str) -> bool:
    """`params` is a run of bundled `profile` with the world of `other`."""
    return profile_of(params) == profile and world(params) == world(other)


def engine_commit(run: Any) -> str | None:
    """The engine's commit as its manifest recorded it, else as its label names it."""
    commit = getattr(run, "engine_commit", None)
    if isinstance(commit, str) and commit:
        return commit[:7]
    found = _COMMIT_IN_LABEL.search(str(getattr(run, "profile", "")))
    return found.group(1)[:7] if found else None


def is_fitted(params: str | None, fitted: dict[str, Any]) -> bool:
    """The run's world and seed are those the profile's choices were fitted on."""
    doc = json.loads(params or "{}")
    return bool(fitted) and all(doc.get(k) == v for k, v in fitted.items())


def pairs(runs: pd.DataFrame, experiment: str, profiles: dict[str, str],
          fitted: dict[str, Any] | None = None) -> list[Pair]:
    """One pair per complete engine run of `experiment` whose commit has a profile, with the
    latest complete run of that profile under the same params; pairs ordered by profile (in
    `profiles`' order), fitted first, then seed."""
    runs = runs[(runs.experiment == experiment) & runs.complete].sort_values(
        ["started_at", "run_id"])
    bundled = runs[runs.target_kind == "reference"]
    found = []
    for engine in runs[runs.target_kind == "engine"].itertuples():
        commit = engine_commit(engine)
        profile = next((p for c, p in profiles.items() if commit and c.startswith(commit)),
                       None)
        if profile is None:
            continue
        same = bundled[[same_world(p, engine.params, profile) for p in bundled.params]]
        if not same.empty:
            found.append(Pair(same.iloc[-1], runs.loc[engine.Index], profile, commit,
                              is_fitted(engine.params, fitted or {})))
    latest = {(p.profile, world(p.engine_run.params)): p for p in found}  # a rerun replaces
    order = list(profiles.values())
    return sorted(latest.values(), key=lambda p: (order.index(p.profile), not p.fitted,
                                                  int(p.engine_run.seed or 0),
                                                  p.engine_run.run_id))
