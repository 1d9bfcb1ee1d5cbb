"""Separation: the checkers, pure functions of the recorded events (the recorded writes are
the ground truth of which record lives where), never of the plan's intentions."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from fleetprobe.harness.experiment import RunContext

from .plan import (
    DOMAIN_OF_FLEET,
    HOLD_VISIBLE,
    LEGAL,
    NO_RECORD,
    ORG,
    OTHER_RECORD,
    ROUTE_NAMES,
    SALES,
)


def _loads(value: Any) -> Any:
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else value


def written_by_id(writes: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """memory_id -> what the write recorded (account, domain, fleet as stored), admitted only."""
    out = {}
    for w in writes:
        if w.get("status") == 201 and w.get("memory_id"):
            stored = w.get("stored_fleet_id") or w.get("fleet_id")
            plan_fleet = next((f for f in (SALES, LEGAL, ORG)
                               if stored and stored.endswith(f)), None)
            out[w["memory_id"]] = {**w, "stored": stored, "plan_fleet": plan_fleet}
    return out


def judge_items(items: Sequence[dict[str, Any]], authorized: Sequence[str]
                ) -> dict[str, int]:
    """Counts over one response: returned, restricted (a partition outside `authorized`),
    unpartitioned (no fleet at all: MemClaw's predicate lets those through by design)."""
    allowed = set(authorized)
    restricted = sum(1 for i in items if i.get("fleet_id") and i["fleet_id"] not in allowed)
    unpartitioned = sum(1 for i in items if not i.get("fleet_id"))
    return {"n_returned": len(items), "n_restricted": restricted,
            "n_unpartitioned": unpartitioned}


def judge_contamination(probe: dict[str, Any]) -> dict[str, Any]:
    """One query's judgement; unanswered queries stay unjudged (contaminated null)."""
    base = {k: probe.get(k) for k in ("agent", "account", "account_kind", "op_kind", "top_k")}
    if probe.get("items") is None:
        return base | {"n_returned": None, "n_restricted": None, "n_unpartitioned": None,
                       "contaminated": None}
    counts = judge_items(_loads(probe["items"]), _loads(probe["authorized"]))
    return base | counts | {"contaminated": counts["n_restricted"] > 0}


def judge_absence(probe: dict[str, Any], written: dict[str, dict[str, Any]]
                  ) -> dict[str, Any]:
    """Vera on a hold-only account: does her answer hold anything about the account?"""
    base = {k: probe.get(k) for k in ("agent", "account", "op_kind", "top_k")}
    if probe.get("items") is None:
        return base | {"n_about_account": None, "hold_returned": None, "absence_verdict": None}
    allowed = set(_loads(probe["authorized"]))
    about = [i for i in _loads(probe["items"])
             if _account_of(i, written) == probe["account"]]
    hold = any(written.get(i["id"], {}).get("record_kind") == "hold" for i in about)
    authorized_about = [i for i in about if i.get("fleet_id") in allowed]
    verdict = HOLD_VISIBLE if hold else (OTHER_RECORD if authorized_about else NO_RECORD)
    return base | {"n_about_account": len(about), "hold_returned": hold,
                   "absence_verdict": verdict}


def _account_of(item: dict[str, Any], written: dict[str, dict[str, Any]]) -> str | None:
    if item.get("id") in written:
        return written[item["id"]]["account"]
    return item.get("account")


def judge_attribution(calls: Sequence[dict[str, Any]], parties: dict[str, str],
                      mode: str, contents: dict[str, str] | None = None) -> dict[str, Any]:
    """Can Axis name each party (memory id -> its true fleet, from the write) with the right
    fleet from what the calls returned? Blended: from each item's `fleet_id`. Per-fleet: from
    the call's own label. Summary: from the summary text alone (the call's label, or a fleet
    id the text itself names). `misattributed`: appearances given a wrong fleet."""
    answered = [c for c in calls if c.get("items") is not None]
    if not calls or len(answered) < len(calls):
        return {"sales_named": None, "legal_named": None, "both_named": None,
                "misattributed": None, "both_named_summary": None}
    contents = contents or {}
    named = dict.fromkeys(parties, False)
    named_summary = dict.fromkeys(parties, False)
    wrong = 0
    for call in answered:
        label = call.get("fleet_label") if mode == "per_fleet" else None
        summary = call.get("summary") or ""
        for item in _loads(call["items"]):
            true_fleet = parties.get(item.get("id"))
            if true_fleet is None:
                continue
            claimed = label if mode == "per_fleet" else item.get("fleet_id")
            if claimed == true_fleet:
                named[item["id"]] = True
            else:
                wrong += 1
        for memory_id, true_fleet in parties.items():
            given = label if mode == "per_fleet" else (true_fleet if true_fleet in summary
                                                        else None)
            if summary_names(summary, contents.get(memory_id), given, true_fleet):
                named_summary[memory_id] = True
    domain_of = {m: DOMAIN_OF_FLEET.get(_plan_fleet(f)) for m, f in parties.items()}

    def all_named(flags: dict[str, bool], domain: str) -> bool:
        wanted = [m for m, d in domain_of.items() if d == domain]
        return bool(wanted) and all(flags[m] for m in wanted)

    sales, legal = all_named(named, "sales"), all_named(named, "legal")
    return {"sales_named": sales, "legal_named": legal, "both_named": sales and legal,
            "misattributed": wrong,
            "both_named_summary": all_named(named_summary, "sales")
            and all_named(named_summary, "legal")}


def summary_names(summary: str, content: str | None, given: str | None,
                  true_fleet: str) -> bool:
    """The summary carries the party (its first clause) and the fleet it is given is right."""
    if not content or given is None:
        return False
    first = content.split(";")[0].split(". ")[0].strip()
    return bool(first) and first in summary and given == true_fleet


def _plan_fleet(fleet: str | None) -> str | None:
    return next((f for f in (SALES, LEGAL, ORG) if fleet and fleet.endswith(f)), None)


def judge_reserved(event: dict[str, Any]) -> dict[str, Any]:
    status, code, message = event.get("status"), event.get("error_code"), event.get(
        "error_message") or ""
    answered = status is not None and status < 500 and status != 429
    names = ROUTE_NAMES[event["memory_type"]]
    return {"agent": event["agent"], "memory_type": event["memory_type"],
            "refused": (status == 422) if answered else None,
            "envelope_ok": (status == 422 and code == "INVALID_ARGUMENTS") if answered
            else None,
            "names_route": any(n in message for n in names) if answered else None,
            "stored": (status == 201) if answered else None}


def judge_insight_read(event: dict[str, Any]) -> dict[str, Any]:
    items = _loads(event.get("items")) if event.get("items") is not None else None
    readable = None if items is None or event.get("status") is None or (
        event["status"] >= 500 or event["status"] == 429) else any(
        i.get("id") == event["memory_id"] for i in items)
    return {k: event.get(k) for k in ("agent", "target", "axis", "insight_id", "memory_id",
                                      "account", "domain")} | {
        "readable": readable,
        "in_org_shared": _plan_fleet(event.get("stored_fleet_id")) == ORG
        if event.get("target") == "insight" and event.get("stored_fleet_id") else None}


def judge_graph(event: dict[str, Any], written: dict[str, dict[str, Any]],
                insight_ids: dict[str, str]) -> dict[str, Any]:
    """Rows the server reports as reached by its entity graph: how many, how many outside
    the caller's partitions, whether Axis's insight on the account was among them."""
    base = {k: event.get(k) for k in ("agent", "account", "account_kind")}
    if event.get("items") is None:
        return base | {"observable": None, "n_graph": None, "n_graph_restricted": None,
                       "insight_reached": None, "restricted_reached": None}
    items = _loads(event["items"])
    allowed = set(_loads(event["authorized"]))
    observable = any(i.get("path") is not None for i in items) if items else None
    graph = [i for i in items if i.get("path") == "graph"]
    restricted = [i for i in graph if i.get("fleet_id") and i["fleet_id"] not in allowed]
    return base | {
        "observable": observable, "n_graph": len(graph), "n_graph_restricted": len(restricted),
        "insight_reached": any(insight_ids.get(i.get("id")) == event["account"] for i in graph),
        "restricted_reached": bool(restricted)}


def _of(events: Sequence[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    return [e for e in events if e["phase"] == phase]


def judgements(events: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every judgement of a separation run from its recorded events, per judgement phase in
    the order the run records them (what `fleetprobe judge` recomputes)."""
    written = written_by_id(_of(events, "write"))
    probes = _of(events, "probe")
    return {
        "contamination": [judge_contamination(p) for p in probes],
        "absence": [judge_absence(p, written) for p in probes
                    if p["agent"] == "vera" and p["account_kind"] == "hold_only"],
        "attribution": _attributions(_of(events, "fanout"), written),
        "reserved_check": [judge_reserved(e) for e in _of(events, "reserved")],
        "insight_access": [judge_insight_read(e) for e in _of(events, "insight_read")],
        "graph_reach": _graph_reach(events, written),
    }


def _attributions(fanout: list[dict[str, Any]], written: dict[str, dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    by_account: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for call in fanout:
        by_account[(call["account"], call["top_k"])].append(call)
    contents = {m: w.get("content") for m, w in written.items()}
    out = []
    for (account, top_k), calls in sorted(by_account.items()):
        parties = {m: w["stored"] for m, w in written.items()
                   if w["account"] == account and w["record_kind"] in ("deal", "hold")}
        for mode in ("blended", "per_fleet"):
            chosen = [c for c in calls if c["mode"] == mode]
            out.append({"account": account, "mode": mode, "top_k": top_k,
                        **judge_attribution(chosen, parties, mode, contents)})
    return out


def _graph_reach(events: Sequence[dict[str, Any]], written: dict[str, dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    insight_account: dict[str, str] = {}
    for gen in _of(events, "insight_generate"):
        for finding in _loads(gen.get("findings")):
            related = [written[m] for m in finding.get("related_memory_ids", [])
                       if m in written]
            if finding.get("insight_memory_id") and related:
                insight_account[finding["insight_memory_id"]] = related[0]["account"]
    return [judge_graph(e, written, insight_account) for e in _of(events, "graph_probe")]


def _record(ctx: RunContext, *phases: str) -> None:
    judged = judgements(ctx.events())
    for phase in phases:
        for fields in judged[phase]:
            ctx.record(phase, **fields)


def check_contamination(ctx: RunContext) -> None:
    _record(ctx, "contamination", "absence")


def check_attribution(ctx: RunContext) -> None:
    _record(ctx, "attribution")


def check_reserved(ctx: RunContext) -> None:
    _record(ctx, "reserved_check")


def check_insights(ctx: RunContext) -> None:
    _record(ctx, "insight_access")


def check_graph(ctx: RunContext) -> None:
    _record(ctx, "graph_reach")
