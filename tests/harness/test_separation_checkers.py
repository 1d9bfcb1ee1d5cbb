"""The separation checkers are pure functions of recorded events: each judgement is tested
on hand-made events, including the cases that must come out negative."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from fleetprobe.experiments.separation import (
    HOLD_VISIBLE,
    NO_RECORD,
    OTHER_RECORD,
    SeparationParams,
    judge_absence,
    judge_attribution,
    judge_contamination,
    judge_graph,
    judge_items,
    judge_reserved,
    make_plan,
)

SALES, LEGAL, ORG = "fpx-fleet-sales", "fpx-fleet-legal", "fpx-fleet-org-shared"
VERA = [SALES, ORG]


def item(memory_id: str, fleet: str | None, **extra: object) -> dict:
    return {"id": memory_id, "fleet_id": fleet, **extra}


def probe(items: list[dict] | None, authorized: list[str] = VERA, **extra: object) -> dict:
    return {"agent": "vera", "account": "Acme Corp", "account_kind": "hold_only",
            "op_kind": "recall", "top_k": 5, "authorized": json.dumps(authorized),
            "items": None if items is None else json.dumps(items), **extra}


def test_judge_items_counts_restricted_and_unpartitioned_apart() -> None:
    counts = judge_items([item("a", SALES), item("b", LEGAL), item("c", None),
                          item("d", ORG), item("e", "fpy-fleet-sales")], VERA)
    # a partition of another run is outside the authorised set too
    assert counts == {"n_returned": 5, "n_restricted": 2, "n_unpartitioned": 1}


def test_contamination_is_true_only_with_a_restricted_record() -> None:
    assert judge_contamination(probe([item("a", SALES), item("b", ORG)]))["contaminated"] is False
    judged = judge_contamination(probe([item("a", SALES), item("h", LEGAL)]))
    assert judged["contaminated"] is True and judged["n_restricted"] == 1
    assert judge_contamination(probe([]))["contaminated"] is False
    unanswered = judge_contamination(probe(None))
    assert unanswered["contaminated"] is None and unanswered["n_returned"] is None


WRITTEN = {
    "hold-acme": {"account": "Acme Corp", "record_kind": "hold"},
    "deal-acme": {"account": "Acme Corp", "record_kind": "deal"},
    "deal-other": {"account": "Zenith Corp", "record_kind": "deal"},
}


def test_absence_verdicts() -> None:
    nothing = judge_absence(probe([item("deal-other", SALES)]), WRITTEN)
    assert nothing["absence_verdict"] == NO_RECORD and nothing["n_about_account"] == 0
    hold = judge_absence(probe([item("hold-acme", LEGAL)]), WRITTEN)
    assert hold["absence_verdict"] == HOLD_VISIBLE and hold["hold_returned"] is True
    other = judge_absence(probe([item("deal-acme", SALES)]), WRITTEN)
    assert other["absence_verdict"] == OTHER_RECORD
    # a record the harness did not write is matched on its account tag
    tagged = judge_absence(probe([item("x", ORG, account="Acme Corp")]), WRITTEN)
    assert tagged["absence_verdict"] == OTHER_RECORD
    assert judge_absence(probe(None), WRITTEN)["absence_verdict"] is None


PARTIES = {"deal": SALES, "hold": LEGAL}
CONTENTS = {"deal": "Acme Corp deal status: late stage; more", "hold":
            "Acme Corp legal status: GDPR hold; more"}


def call(items: list[dict], label: str | None = None, summary: str = "") -> dict:
    return {"items": json.dumps(items), "fleet_label": label, "summary": summary}


def test_blended_attribution_reads_the_fleet_field() -> None:
    both = judge_attribution([call([item("deal", SALES), item("hold", LEGAL)])], PARTIES,
                             "blended", CONTENTS)
    assert both["both_named"] is True and both["misattributed"] == 0
    # the hold did not make the blended top_k
    missing = judge_attribution([call([item("deal", SALES), item("n", ORG)])], PARTIES,
                                "blended", CONTENTS)
    assert missing["sales_named"] is True and missing["legal_named"] is False
    assert missing["both_named"] is False
    # a response whose fleet field is wrong names the party with the wrong fleet
    wrong = judge_attribution([call([item("deal", SALES), item("hold", ORG)])], PARTIES,
                              "blended", CONTENTS)
    assert wrong["legal_named"] is False and wrong["misattributed"] == 1


def test_per_fleet_attribution_reads_the_label_and_counts_mislabels() -> None:
    calls = [call([item("deal", SALES), item("hold", LEGAL)], label=SALES),
             call([item("hold", LEGAL)], label=LEGAL), call([], label=ORG)]
    judged = judge_attribution(calls, PARTIES, "per_fleet", CONTENTS)
    assert judged["both_named"] is True and judged["misattributed"] == 1
    only_sales = judge_attribution(calls[:1] + calls[2:], PARTIES, "per_fleet", CONTENTS)
    assert only_sales["legal_named"] is False
    unanswered = judge_attribution([*calls, {"items": None}], PARTIES, "per_fleet", CONTENTS)
    assert unanswered["both_named"] is None


def test_summary_attribution_needs_the_text_and_a_right_label() -> None:
    summary = "Acme Corp deal status: late stage. Acme Corp legal status: GDPR hold."
    blended = judge_attribution([call([item("deal", SALES), item("hold", LEGAL)],
                                      summary=summary)], PARTIES, "blended", CONTENTS)
    assert blended["both_named_summary"] is False  # no fleet in the text
    labelled = [call([item("deal", SALES)], SALES, "Acme Corp deal status: late stage."),
                call([item("hold", LEGAL)], LEGAL, "Acme Corp legal status: GDPR hold.")]
    assert judge_attribution(labelled, PARTIES, "per_fleet", CONTENTS)["both_named_summary"]
    swapped = [call([], SALES, "Acme Corp legal status: GDPR hold."),
               call([], LEGAL, "Acme Corp deal status: late stage.")]
    assert not judge_attribution(swapped, PARTIES, "per_fleet", CONTENTS)["both_named_summary"]


MESSAGE = ("memory_type='insight' is server-reserved and cannot be supplied on writes. Use "
           "memclaw_evolve for outcome/rule or memclaw_insights for insight; ...")


def reserved(status: int | None, code: str | None, message: str, kind: str = "insight") -> dict:
    return {"agent": "vera", "memory_type": kind, "status": status, "error_code": code,
            "error_message": message}


def test_reserved_judgement() -> None:
    ok = judge_reserved(reserved(422, "INVALID_ARGUMENTS", MESSAGE))
    assert ok == {"agent": "vera", "memory_type": "insight", "refused": True,
                  "envelope_ok": True, "names_route": True, "stored": False}
    assert judge_reserved(reserved(422, "BAD_REQUEST", MESSAGE))["envelope_ok"] is False
    vague = judge_reserved(reserved(422, "INVALID_ARGUMENTS", "memory_type is reserved"))
    assert vague["names_route"] is False
    # outcome must point at evolve; the insights route alone does not name it
    assert judge_reserved(reserved(422, "INVALID_ARGUMENTS", "use memclaw_insights",
                                   "outcome"))["names_route"] is False
    stored = judge_reserved(reserved(201, None, ""))
    assert stored["stored"] is True and stored["refused"] is False
    lost = judge_reserved(reserved(503, None, ""))
    assert lost["refused"] is None and lost["stored"] is None


def graph_event(items: list[dict] | None) -> dict:
    return {"agent": "vera", "account": "Acme Corp", "account_kind": "conflict",
            "authorized": json.dumps(VERA), "items": None if items is None else json.dumps(items)}


def test_graph_judgement_counts_only_graph_rows() -> None:
    items = [item("i1", ORG, path="graph", graph_hop=0),
             item("h", LEGAL, path="graph", graph_hop=1),
             item("h2", LEGAL, path="similarity"), item("d", SALES, path="graph")]
    judged = judge_graph(graph_event(items), {}, {"i1": "Acme Corp"})
    assert judged["observable"] is True and judged["n_graph"] == 3
    assert judged["n_graph_restricted"] == 1 and judged["restricted_reached"] is True
    assert judged["insight_reached"] is True
    other = judge_graph(graph_event(items), {}, {"i1": "Zenith Corp"})
    assert other["insight_reached"] is False
    silent = judge_graph(graph_event([item("d", SALES)]), {}, {})
    assert silent["observable"] is False and silent["n_graph"] == 0
    assert judge_graph(graph_event(None), {}, {})["n_graph"] is None


def test_plan_is_seeded_and_mixes_the_three_kinds() -> None:
    params = SeparationParams(experiment="separation", seed=3)
    plan = make_plan(params)
    assert plan == make_plan(params)
    assert plan.accounts[0].name == "Acme Corp"
    assert len({a.name for a in plan.accounts}) == 100
    assert Counter(a.kind for a in plan.accounts) == {"conflict": 40, "cleared": 35,
                                                       "hold_only": 25}
    other = make_plan(SeparationParams(experiment="separation", seed=4))
    assert [a.kind for a in other.accounts] != [a.kind for a in plan.accounts]
    # every record about an account names it, so domains overlap in vocabulary
    for account in plan.accounts[:20]:
        assert all(account.name in account.content(k) for k in account.record_kinds)


def test_top_k_values_are_validated() -> None:
    with pytest.raises(ValueError):
        SeparationParams(experiment="separation", top_k=[0, 5])
    with pytest.raises(ValueError):
        SeparationParams(experiment="separation", top_k=[5, 5])
    assert SeparationParams(experiment="separation", top_k=[20, 1]).top_k == [1, 20]
