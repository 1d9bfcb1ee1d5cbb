"""The `contradiction` checker: one verdict per fact-run, a pure function of the recorded
write and re-fetch events (the same functions `fleetprobe judge` calls)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fleetprobe.experiments.contradiction.plan import SCENARIOS
from fleetprobe.harness.experiment import RunContext


def check_fact_runs(ctx: RunContext) -> None:
    """One `check` judgement per planned fact-run, from recorded write and refetch events."""
    writes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    refetches: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for event in ctx.events("write"):
        writes[(event["fact_id"], event["scenario"])].append(event)
    for event in ctx.events("refetch"):
        refetches[(event["fact_id"], event["scenario"])].append(event)
    for fact in ctx.plan.facts:
        for scenario in SCENARIOS:
            key = (fact.fact_id, scenario)
            ctx.record("check", fact_id=fact.fact_id, scenario=scenario,
                       **judge_fact_run(writes[key], refetches[key]))



# -- checkers: pure functions over recorded events ---------------------------------------

REJECT_MESSAGES = (
    ("Near-duplicate memory exists", "near_duplicate"),
    ("Duplicate memory exists", "exact_duplicate"),
)


def reject_reason(status: int | None, error: str | None) -> str | None:
    """Why a write was not admitted, from its status and the server's message."""
    if status == 201:
        return None
    if status == 429:
        return "rate_limited"
    if status == 409 and error:
        for message, reason in REJECT_MESSAGES:
            if message in error:
                return reason
    return "other"


def judge_fact_run(writes: list[dict[str, Any]], refetches: list[dict[str, Any]]) -> dict[str, Any]:
    """The `check` fields of one fact-run from its `write` and `refetch` events.

    Detected when a re-fetched admitted row of this run carries `supersedes_id` (it is the newer
    row of a supersession) or has left `active` (it is the older row). A run with one admitted
    write can still be detected when that row was superseded by, or superseded, a row of the
    fact's other scenario (the paper's cross-scenario detections).
    """
    n_admitted = sum(1 for w in writes if w.get("admitted"))
    seen = [r for r in refetches if r.get("status") == 200]
    newer = [r for r in seen if r.get("observed_supersedes_id")]
    older = [r for r in seen if r.get("observed_status") not in (None, "active")]
    triggered = newer or older
    return {
        "both_admitted": n_admitted == 2,
        "n_admitted": n_admitted,
        "detected": bool(triggered),
        "triggered_memory_id": triggered[0]["memory_id"] if triggered else None,
    }


def active_rows_of(search_body: Any, fact_key: str, scenario: str) -> int | None:
    """How many returned rows carry this fact-run's identifier (None: no usable body)."""
    if not isinstance(search_body, dict) or not isinstance(search_body.get("items"), list):
        return None
    count = 0
    for item in search_body["items"]:
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and meta.get("fact_key") == fact_key \
                and meta.get("scenario") == scenario:
            count += 1
    return count


def is_stale(active_rows: int | None) -> bool | None:
    """A fact-run reads stale when an active-only search still returns both of its rows."""
    return None if active_rows is None else active_rows > 1
