"""Target labels beside the bundled profiles: live endpoints judged against the paper.

Every run carries a target label (manifest `target.label`; the `profile` column of the
analysis). The paper's claims name the bundled profile that reproduces the state the paper
measured; any other label that is an engine rather than a design comparand (a live endpoint,
the bundled `memclaw-2.29`, a relabelled reference run) is judged against every claim its
runs measure, each label in rows of its own, never merged with another.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

# Bundled profiles that are design alternatives, not engines: they have no paper claim to meet.
COMPARANDS = frozenset({"proposed", "naive", "hardened"})
LIVE_LATENCY_FACTOR = 2.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

LATENCY_RULE = (
    "Latency rule: a latency claim is judged only against a live target (the bundled "
    "server's latency measures this machine, not memclaw.net: `not comparable`). For a live "
    "target it is `reproduced` when every percentile the paper states is within a factor of "
    f"{LIVE_LATENCY_FACTOR:g} of the paper's value, in either direction, else `differs`; the "
    "measured/paper ratios are printed. A loopback endpoint is judged the same way but marked "
    "`loopback`, since its numbers exclude the network the paper's include. Live labels are "
    "compared with each other only in the table below, metric by metric, beside the client "
    "pacing each run used (the same pacing is needed for a fair comparison)."
)


def claim_profiles(results: Any) -> set[str]:
    return {claim["profile"] for claim in results.claims}


def judged_labels(results: Any) -> list[str]:
    """Canonical labels no claim names and that are not design comparands."""
    named = claim_profiles(results) | COMPARANDS
    labels = results.canonical.profile.dropna().unique() if not results.canonical.empty else []
    # `<comparand> +<embedder>` (an embedder ablation of a comparand) is a comparand too
    return sorted(str(label) for label in labels
                  if label not in named and str(label).split(" +", 1)[0] not in COMPARANDS)


def only_live_selected(results: Any) -> bool:
    """True when runs were selected and every one belongs to a judged label (so the bundled
    profiles' committed verdicts are not printed as if they were the selection's)."""
    if not results.selected:
        return False
    runs = results.runs[results.runs.run_id.isin(list(results.selected))]
    return not runs.empty and set(runs.profile) <= set(judged_labels(results))


def label_claims(results: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, claim) for every judged label and every claim whose experiment it ran."""
    canonical = results.canonical
    for label in judged_labels(results):
        experiments = set(canonical[canonical.profile == label].experiment)
        for claim in results.claims:
            if claim["metric"].split("_", 1)[0] in experiments:
                yield label, claim


def is_loopback(base_url: str | None) -> bool:
    return (urlsplit(base_url or "").hostname or "") in LOOPBACK_HOSTS


def latency_verdict(run: pd.Series, measured: dict[str, float], claim: dict[str, Any],
                    keys: Sequence[str]) -> tuple[str, str]:
    """(status, reason) for a latency claim under LATENCY_RULE."""
    from fleetprobe.analysis.verdict import DIFFERS, NOT_COMPARABLE, REPRODUCED

    if run.target_kind != "live":
        return NOT_COMPARABLE, (f"target kind {run.target_kind}: the paper measured "
                                "memclaw.net, latency is comparable only against a live target")
    ratios = {k: measured[k] / claim[k] for k in keys if k in measured and claim[k]}
    within = bool(ratios) and all(
        1 / LIVE_LATENCY_FACTOR <= r <= LIVE_LATENCY_FACTOR for r in ratios.values())
    where = "live target (loopback)" if is_loopback(run.get("base_url")) else "live target"
    return (REPRODUCED if within else DIFFERS), f"{where}; measured/paper " + ", ".join(
        f"{k} x{r:.2f}" for k, r in ratios.items())


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
                        ("reproduced", "differs", "not comparable", "not measured")}})
    lines += [pd.DataFrame(rows).to_markdown(index=False), "", LATENCY_RULE, ""]
    latency = _latency_rows(results, labels)
    lines += [latency.to_markdown(index=False) if not latency.empty else
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
    import json

    if not isinstance(params, str):
        return ""
    client = json.loads(params).get("client") or {}
    return ", ".join(f"{k}={client[k]}" for k in ("writes_per_s", "searches_per_s",
                                                  "max_concurrency") if k in client)
