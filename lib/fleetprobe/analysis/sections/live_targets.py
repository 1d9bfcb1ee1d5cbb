"""Target labels beside the bundled profiles: live endpoints judged against the paper (the
REPRODUCTION.md section with each label's verdict counts and the live latencies).

Every run carries a target label (manifest `target.label`; the `profile` column of the
analysis). The paper's claims name the bundled profile that reproduces the state the paper
measured; any other label that is an engine rather than a design comparand (a live endpoint,
the bundled `memclaw-2.29`, a relabelled reference run) is judged against every claim its
runs measure, each label in rows of its own, never merged with another.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from fleetprobe.analysis.base.claims import judge
from fleetprobe.analysis.base.labels import LIVE_LATENCY_FACTOR, judged_labels, label_claims
from fleetprobe.analysis.base.section import REPRODUCTION, Context, Fragment, SectionOutput, finish
from fleetprobe.analysis.base.tables import Table, markdown, on_page

KEY, TITLE = "live_targets", "Other targets"
EXPERIMENTS = ("leakage", "contradiction", "provenance", "propagation")

LATENCY_RULE = (
    "Latency rule: a latency claim is judged only against a live target that is not on this "
    "machine (the bundled server's and the engine's loopback latency measure this shared "
    "machine, not memclaw.net: `not comparable`). There it is the same as the paper's when "
    "every percentile the paper states is within a factor of "
    f"{LIVE_LATENCY_FACTOR:g} of the paper's value, in either direction, else it differs; the "
    "measured/paper ratios are printed. Whether that counts as reproduced follows the basis "
    "and trials rules at the head of this page. Live labels are "
    "compared with each other only in the table below, metric by metric, beside the client "
    "pacing each run used (the same pacing is needed for a fair comparison)."
)


def section(results: Any, verdicts: Sequence[Any]) -> list[str]:
    """REPRODUCTION.md lines: each judged label's verdict counts, then live latencies."""
    labels = judged_labels(results)
    lines = ["## Target labels judged against the paper", ""]
    if not labels:
        return lines + ["_no live or other engine runs yet: point an experiment at an "
                        "endpoint with `make run-leakage PARAMS=params/live` (and the other "
                        "experiments; README, live targets) or set `target.label`._", "",
                        LATENCY_RULE, ""]
    rows = []
    for label in labels:
        mine = [v for v in verdicts if v.profile == label]
        runs = results.canonical[results.canonical.profile == label]
        counts = pd.Series([v.status for v in mine]).value_counts()
        rows.append({"label": label, "target kind": "/".join(sorted(set(runs.target_kind))),
                     "server version": "/".join(sorted({str(v) for v in runs.server_version
                                                        if v is not None})) or "-",
                     "experiments": ", ".join(sorted(runs.experiment)),
                     **{status: int(counts.get(status, 0)) for status in
                        sorted({v.status for v in verdicts})}})
    lines += [markdown(pd.DataFrame(rows)), "", LATENCY_RULE, ""]
    latency = _latency_rows(results, labels)
    lines += [on_page(latency, LATENCIES) if not latency.empty else
              "_no latency measured for these labels._", ""]
    return lines


def _latency_rows(results: Any, labels: Sequence[str]) -> pd.DataFrame:
    canonical = results.canonical[results.canonical.profile.isin(list(labels))]
    frame = results.latencies
    if frame.empty or canonical.empty:
        return pd.DataFrame()
    frame = frame[frame.run_id.isin(list(canonical.run_id))]
    kinds = canonical.set_index("run_id")
    rows = []
    for r in frame.itertuples():
        pacing = (_client(kinds.params.get(r.run_id)) if "params" in kinds else {})
        rows.append({"metric": r.metric, "label": kinds.profile[r.run_id],
                     "target kind": kinds.target_kind[r.run_id],
                     "n": int(r.n) if pd.notna(r.n) else 0,
                     "p50": r.p50, "p95": r.p95, "p99": r.p99,
                     "client pacing": pacing or "-"})
    return pd.DataFrame(rows).sort_values(["metric", "label"]) if rows else pd.DataFrame()


def _client(params: Any) -> str:
    if not isinstance(params, str):
        return ""
    client = json.loads(params).get("client") or {}
    return ", ".join(f"{k}={client[k]}" for k in ("writes_per_s", "searches_per_s",
                                                  "max_concurrency") if k in client)


LATENCIES = "live_latencies"


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        verdicts = [judge(results, claim, label) for label, claim in label_claims(results)]
        lines = section(results, verdicts)
        labels = judged_labels(results)
        runs = tuple(results.canonical[results.canonical.profile.isin(labels)].run_id)
        latency = _latency_rows(results, labels)
    finally:
        results.con.close()
    output = SectionOutput(
        KEY, TITLE,
        "Every target label other than the profile a claim names (live endpoints, the "
        "engine's profile, backends): its verdict counts and its latencies, each label on "
        "its own. The table is in REPRODUCTION.md; each label's verdicts are in the verdict "
        "table.", fragments=[Fragment(REPRODUCTION, 40, "\n".join(lines))], runs=runs,
        tables={} if latency.empty else {LATENCIES: Table(
            LATENCIES, "Latencies of the target labels other than the claims' profiles",
            latency, views=("latency_metrics",))})
    return finish(output, context)
