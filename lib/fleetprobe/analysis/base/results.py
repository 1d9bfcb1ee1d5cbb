"""The measured metrics of a traces root, with the paper's values and the canonical runs.

`Results` is what tables, figures and the verdict read: the long-form rate and latency
tables from the metric views, the paper's claims from paper_values.yaml, and which run is
canonical for each experiment and profile.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import yaml

from fleetprobe.analysis.base import db
from fleetprobe.analysis.base.stats import Rate, rate
from fleetprobe.analysis.base.summary import latency_table, rate_table

PAPER_VALUES = Path(__file__).resolve().parent.parent / "paper_values.yaml"
# Why a run was chosen as canonical (the `basis` column); only the first is a full reproduction.
PAPER_SCALE, NOT_PAPER_SCALE, INCOMPLETE, SELECTED = (
    "paper scale", "not at paper scale", "incomplete run", "selected")
# A run's role: its params are the paper's configuration (headline_params), or they differ.
HEADLINE, ABLATION = "headline", "ablation"
# the paper's configuration on another seed (headline_params' `seed` alone differs): never
# canonical, read by the seed-spread table (sections/verdict/seeds.py)
REPEAT = "repeat"
PROFILES = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "naive")


def load_paper_values(path: Path = PAPER_VALUES) -> dict[str, Any]:
    """paper_values.yaml as a dict; claims keep their file order."""
    # the C loader when PyYAML has it (the pure-Python one is several times slower)
    return yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@dataclass
class Results:
    """Every measured number under one traces root, ready for lookup by claim and run."""

    con: duckdb.DuckDBPyConnection
    paper: dict[str, Any]
    selected: Sequence[str] = field(default_factory=tuple)
    _views: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, traces_root: Path, run_ids: Iterable[str] | None = None,
             paper_values: Path = PAPER_VALUES,
             experiments: Collection[str] | None = None) -> Results:
        """Read every run under traces_root; `run_ids` makes those the canonical runs;
        `experiments` loads only those experiments' events (`db.connect`)."""
        return cls(db.connect(Path(traces_root), experiments=experiments),
                   load_paper_values(paper_values), tuple(run_ids or ()))

    @cached_property
    def runs(self) -> pd.DataFrame:
        frame = self.con.execute("SELECT * FROM runs ORDER BY run_id").df()
        frame["paper_scale"] = [self._is_paper_scale(r.experiment, r.planned)
                                for r in frame.itertuples()]
        frame["differs"] = ["; ".join(self.headline_differences(r.experiment, r.params))
                            for r in frame.itertuples()]
        frame["role"] = [ABLATION if r.differs else REPEAT if self._other_seed(r.experiment, r.seed)
                         else HEADLINE for r in frame.itertuples()]
        return frame

    @cached_property
    def rates(self) -> pd.DataFrame:
        return rate_table(self.con)

    @cached_property
    def latencies(self) -> pd.DataFrame:
        return latency_table(self.con)

    @cached_property
    def statuses(self) -> dict[tuple[str, str], list[tuple[str | None, int | None, int]]]:
        """(run_id, phase) -> [(axis, HTTP status or None, events)]: what each run's requests
        were answered, from one query (the verdicts' bases ask per claim and run)."""
        found: dict[tuple[str, str], list[tuple[str | None, int | None, int]]] = {}
        for run_id, phase, axis, status, n in self.con.execute(
                "SELECT run_id, phase, axis, status, count(*) FROM events "
                "GROUP BY ALL ORDER BY ALL").fetchall():
            found.setdefault((run_id, phase), []).append((axis, status, int(n)))
        return found

    @cached_property
    def failures(self) -> dict[str, list[tuple[str, int]]]:
        """run_id -> [(error, requests)], commonest first: the requests the harness could not
        answer around (transport errors, 5xx and 429 after retries; other 4xx are
        measurements, e.g. a 409 at admission), from one query."""
        found: dict[str, list[tuple[str, int]]] = {}
        for run_id, error, n in self.con.execute(
                "SELECT run_id, error, count(*) AS n FROM events WHERE error IS NOT NULL "
                "AND (status IS NULL OR status >= 500 OR status = 429) "
                "GROUP BY ALL ORDER BY run_id, n DESC, error").fetchall():
            found.setdefault(run_id, []).append((str(error), int(n)))
        return found

    @property
    def claims(self) -> list[dict[str, Any]]:
        return self.paper["claims"]

    def view(self, name: str, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
        """Rows of one metric view, optionally only for some runs (a copy: callers may
        change it). The loaded traces do not change, so each view is queried once; the
        report asks for the same views per verdict, table and figure."""
        frame = self._views.get(name)
        if frame is None:
            frame = self._views[name] = self.con.execute(f'SELECT * FROM "{name}"').df()
        if run_ids is not None:
            frame = frame[frame.run_id.isin(list(run_ids))]
        return frame.reset_index(drop=True).copy()

    # ------------------------------------------------------------------ canonical runs

    @cached_property
    def canonical(self) -> pd.DataFrame:
        """One run per (experiment, profile): a named run where one was selected for it, else
        the latest complete headline run at paper scale, falling back to the latest complete
        headline run and then the latest headline run at all (the `basis` column says which
        rule picked it). An ablation run stands for the paper's configuration only when
        selected; a group with ablation runs alone has no canonical run."""
        runs = self.runs[self.runs.experiment.notna()].copy()
        runs["order"] = runs.started_at.fillna("") + runs.run_id
        picked = _pick_all(runs[runs.profile.notna()], self.selected)
        if not picked:
            return runs.iloc[0:0].drop(columns="order").assign(basis=pd.Series(dtype=str))
        return pd.DataFrame(picked).drop(columns="order").reset_index(drop=True)

    def comparison_runs(self, experiment: str, keep_unselected: bool = False) -> pd.DataFrame:
        """Every run of an experiment a cross-run table should show: the selected ones, else
        the complete paper-scale runs, else the complete runs, else all runs; repeats (the
        headline configuration on another seed: the seed spread's) only when selected or
        when the experiment has no other run. `keep_unselected` shows the selected runs
        beside that default instead of alone."""
        runs = self.runs[self.runs.experiment == experiment]
        chosen = runs.run_id.isin(self.selected)
        if ((runs.role != REPEAT) | chosen).any():
            runs = runs[(runs.role != REPEAT) | chosen]
            chosen = runs.run_id.isin(self.selected)
        if chosen.any() and not keep_unselected:
            return runs[chosen]
        for mask in (runs.complete & runs.paper_scale, runs.complete):
            if mask.any():
                return runs[mask | chosen]
        return runs

    def headline_differences(self, experiment: str | None, params: str | None) -> list[str]:
        """How a run's manifest params differ from the paper's configuration
        (paper_values.yaml headline_params); empty for a headline run. A param the manifest
        does not record counts as a difference: the run cannot show it is the paper's setup."""
        wanted = (self.paper.get("headline_params") or {}).get(experiment or "") or {}
        recorded = json.loads(params) if params else {}
        return [_difference(name, rule, recorded) for name, rule in wanted.items()
                if name != "seed" and not _meets(name, rule, recorded)]

    def _other_seed(self, experiment: str | None, seed: Any) -> bool:
        """The run's manifest seed is recorded and is not the headline seed of its
        experiment (headline_params' `seed`): a repeat, when nothing else differs."""
        wanted = ((self.paper.get("headline_params") or {}).get(experiment or "") or {}).get(
            "seed")
        return wanted is not None and seed is not None and seed == seed and int(seed) != wanted

    def run_params(self, run_id: str) -> dict[str, Any]:
        """The resolved params of a run's manifest (empty when it has none)."""
        params = self.runs.set_index("run_id").params.get(run_id)
        return json.loads(params) if isinstance(params, str) else {}

    def canonical_run(self, experiment: str, profile: str) -> pd.Series | None:
        return self._canonical_index.get((experiment, profile))

    @cached_property
    def _canonical_index(self) -> dict[tuple[str, str], pd.Series]:
        """(experiment, profile) -> its canonical run (asked hundreds of times per report)."""
        index: dict[tuple[str, str], pd.Series] = {}
        for i in range(len(self.canonical)):
            row = self.canonical.iloc[i]
            index.setdefault((row.experiment, row.profile), row)
        return index

    def _is_paper_scale(self, experiment: str | None, planned: str | None) -> bool:
        needed = self.paper.get("paper_scale", {}).get(experiment or "")
        if not needed or not planned:
            return False
        counts = json.loads(planned)
        return all(int(counts.get(phase, 0)) >= n for phase, n in needed.items())

    # ------------------------------------------------------------------ lookups

    def measured_rate(self, metric: str, run_id: str,
                      variant: tuple[str, str] | None = None) -> Rate | None:
        """k of n for a metric in a run (for leakage, in the given or headline variant)."""
        counts = self._rate_counts
        key: tuple[str, ...] = (metric, run_id)
        if key not in counts:  # measured per variant, or not measured in that run
            key = (metric, run_id, *(variant or self.headline_variant))
        found = counts.get(key)
        return None if found is None else rate(*found)

    @cached_property
    def _rate_counts(self) -> dict[tuple[str, ...], tuple[int, int]]:
        """(metric, run_id) -> (k, n) summed over its rows of the rate table; for a metric a
        run measured per variant (leakage), (metric, run_id, variant_write, variant_search)
        -> (k, n) of that variant's rows instead (rows without a variant count in none).
        measured_rate is asked a thousand times per report: a dict lookup each."""
        rates, sums = self.rates, ["numerator", "denominator"]
        varied = rates.variant_write.notna()
        per_variant = set(zip(rates.metric[varied].tolist(), rates.run_id[varied].tolist(),
                              strict=True))
        counts: dict[tuple[str, ...], tuple[int, int]] = {}
        totals = rates.groupby(["metric", "run_id"], sort=False)[sums].sum()
        for key, k, n in zip(totals.index, totals.numerator.tolist(),
                             totals.denominator.tolist(), strict=True):
            if key not in per_variant:
                counts[key] = (int(k), int(n))
        variants = rates[varied].groupby(["metric", "run_id", "variant_write",
                                          "variant_search"], sort=False)[sums].sum()
        for key, k, n in zip(variants.index, variants.numerator.tolist(),
                             variants.denominator.tolist(), strict=True):
            counts[key] = (int(k), int(n))
        return counts

    def measured_latency(self, metric: str, run_id: str,
                         variant: tuple[str, str] | None = None) -> dict[str, float] | None:
        found = self._latency_rows
        key: tuple[str, ...] = (metric, run_id)
        if key not in found:  # measured per variant, or not measured in that run
            key = (metric, run_id, *(variant or self.headline_variant))
        row = found.get(key)
        if row is None:
            return None
        return {k: float(v) for k, v in row.items() if v is not None and not _isnan(v)}

    @cached_property
    def _latency_rows(self) -> dict[tuple[str, ...], dict[str, Any]]:
        """(metric, run_id) -> the n and percentiles of its first row of the latency table;
        for a metric a run measured per variant, (metric, run_id, variant_write,
        variant_search) -> its first row of that variant (rows without one count in none).
        One pass over the table instead of a frame filter per question."""
        frame = self.latencies
        keys = ["metric", "run_id", "variant_write", "variant_search"]
        values = ["n", "p50", "p95", "p99", "max"]
        varied = frame.variant_write.notna()
        per_variant = set(zip(frame.metric[varied].tolist(), frame.run_id[varied].tolist(),
                              strict=True))
        found: dict[tuple[str, ...], dict[str, Any]] = {}
        columns = [frame[c].tolist() for c in (*keys, *values)]
        for metric, run_id, write, search, *row in zip(*columns, strict=True):
            if not isinstance(metric, str) or not isinstance(run_id, str):
                continue  # no group (as groupby drops a missing key)
            if (metric, run_id) in per_variant:
                if not isinstance(write, str) or not isinstance(search, str):
                    continue
                key: tuple[str, ...] = (metric, run_id, write, search)
            else:
                key = (metric, run_id)
            found.setdefault(key, dict(zip(values, row, strict=True)))
        return found

    def reject_reasons(self, run_id: str) -> dict[str, int]:
        """Rejected contradiction writes by reason, largest first."""
        admission = self.view("contradiction_admission", [run_id])
        rejected = admission[admission.outcome != "admitted"]
        counts = rejected.groupby("outcome").writes.sum().sort_values(ascending=False)
        return {str(k): int(v) for k, v in counts.items()}

    @property
    def headline_variant(self) -> tuple[str, str]:
        v = self.paper.get("headline_variant", {})
        return (v.get("variant_write", "fleet_id"), v.get("variant_search", "fleet_ids"))


def _pick_all(runs: pd.DataFrame, selected: Sequence[str]) -> list[pd.Series]:
    """The canonical run of every (experiment, profile), in key order: the run the first rule
    that has candidates picks, the latest of them (`order`), with that rule as its basis."""
    headline = runs.role == HEADLINE
    rules = (
        (SELECTED, runs.run_id.isin(selected)),
        (PAPER_SCALE, headline & runs.complete & runs.paper_scale),
        (NOT_PAPER_SCALE, headline & runs.complete),
        (INCOMPLETE, headline),
    )
    rank = np.full(len(runs), len(rules))
    for i, (_, mask) in reversed(list(enumerate(rules))):
        rank[mask.to_numpy(dtype=bool)] = i
    ranked = runs.assign(_rank=rank)
    chosen = (ranked[ranked._rank < len(rules)]
              .sort_values(["experiment", "profile", "_rank", "order"],
                           ascending=[True, True, True, False])
              .groupby(["experiment", "profile"], sort=True).head(1))
    # the basis named in one column, then a row apiece: adding it to each row (a Series
    # growing by a label) was most of the canonical runs' CPU, in every section
    basis = [rules[int(r)][0] for r in chosen._rank.tolist()]
    chosen = chosen.drop(columns="_rank").assign(basis=basis)
    return [chosen.iloc[i] for i in range(len(chosen))]


def _meets(name: str, rule: Any, recorded: dict[str, Any]) -> bool:
    """A rule is a value the param must equal, {not_null: true}: recorded and not null, or
    {at_most: n}: recorded and <= n (a population no larger than the paper's)."""
    if name not in recorded:
        return False
    if isinstance(rule, dict) and rule.get("not_null"):
        return recorded[name] is not None
    if isinstance(rule, dict) and "at_most" in rule:
        return recorded[name] is not None and recorded[name] <= rule["at_most"]
    return recorded[name] == rule


def _difference(name: str, rule: Any, recorded: dict[str, Any]) -> str:
    headline = ("not null" if isinstance(rule, dict) and rule.get("not_null")
                else f"at most {rule['at_most']}" if isinstance(rule, dict) and "at_most" in rule
                else rule)
    value = "unrecorded" if name not in recorded else (
        "null" if recorded[name] is None else recorded[name])
    return f"{name}: {value} (headline: {headline})"


def _isnan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
