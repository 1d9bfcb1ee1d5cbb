"""Separation: the agents and their partitions, the seeded accounts and their records, the
params and the planned counts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from fleetprobe.harness.experiment import ExperimentParams
from fleetprobe.harness.seeding import rng

SALES, LEGAL, ORG = "fleet-sales", "fleet-legal", "fleet-org-shared"


RESERVED_TYPES = ("insight", "outcome", "rule")
# The server-side route MemClaw's refusal names for each reserved type (tool or REST path).
ROUTE_NAMES = {"insight": ("memclaw_insights", "/insights/generate"),
               "outcome": ("memclaw_evolve", "/evolve"), "rule": ("memclaw_evolve", "/evolve")}
ENDPOINT_MISSING = frozenset({404, 405, 501})
NO_RECORD = "no record in authorized partitions"
HOLD_VISIBLE = "hold visible"
OTHER_RECORD = "authorized record about the account"
PREDICATE = "commercial_progression"


@dataclass(frozen=True)
class AgentSpec:
    name: str  # plan-level agent id; scoped(name, nonce) on the wire
    role: str
    home: str
    authorized: tuple[str, ...]
    trust: int


AGENTS = (
    AgentSpec("vera", "sales", SALES, (SALES, ORG), 1),
    AgentSpec("lex", "legal", LEGAL, (LEGAL, ORG), 1),
    AgentSpec("axis", "admin", ORG, (SALES, LEGAL, ORG), 2),
)
AGENT = {a.name: a for a in AGENTS}
DOMAIN_OF_FLEET = {SALES: "sales", LEGAL: "legal", ORG: "org"}

_PREFIXES = ("Acme", "Borealis", "Cinder", "Dunmore", "Everly", "Fairhaven", "Glenrock",
             "Hollis", "Ironvale", "Jasper", "Kingsley", "Larkspur", "Marlowe", "Northwind",
             "Oakridge", "Prescott", "Quillon", "Ravensworth", "Stonebridge", "Thornbury",
             "Underhill", "Valemont", "Westbrook", "Yarrow", "Zenith")
_SUFFIXES = ("Corp", "Industries", "Logistics", "Health", "Systems", "Partners", "Foods",
             "Energy")
MAX_ACCOUNTS = len(_PREFIXES) * len(_SUFFIXES)
# 20 accounts: 8 conflict, 7 cleared, 5 hold-only (40/35/25 %), shuffled per seed.
_KIND_PATTERN = ("conflict",) * 8 + ("cleared",) * 7 + ("hold_only",) * 5
_STAGES = ("late", "negotiation", "proposal", "verbal-commit")
_CLOSES = ("next week", "this month", "end of quarter", "in two weeks")
_PRODUCTS = ("analytics", "payments", "fleet tracking", "data platform", "support desk")

TEMPLATES = {
    "deal": "{name} deal status: {stage} stage at ${amount}k, close date {close}; the {name} "
            "contract is with procurement.",
    "call": "{name} call notes: the champion confirmed budget for the {product} rollout; "
            "{name} wants the contract and DPA paperwork before close.",
    "hold": "{name} legal status: GDPR hold, the DPA expired {dpa}; no commercial progression "
            "on the {name} deal or contract until a renewed DPA is signed.",
    "clearance": "{name} legal status: cleared, the DPA was renewed {dpa}; commercial "
                 "progression on the {name} deal and contract may continue.",
    "note": "{name} account profile: enterprise account, {years}-year relationship; deal, "
            "contract and DPA questions for {name} go to the account team.",
}
RECORD_WRITER = {"deal": "vera", "call": "vera", "hold": "lex", "clearance": "lex",
                 "note": "axis"}
RECORD_OBJECT = {"deal": "proceed", "hold": "halt", "clearance": "proceed"}
KIND_RECORDS = {"conflict": ("deal", "call", "hold", "note"),
                "cleared": ("deal", "call", "clearance", "note"),
                "hold_only": ("hold",)}
QUERIES = {  # (agent, op) -> query template
    ("vera", "recall"): "{name} deal status",
    ("vera", "search"): "{name} contract and DPA",
    ("lex", "recall"): "{name} legal status",
    ("lex", "search"): "{name} DPA and contract",
}
FANOUT_QUERY = "{name} deal and legal status"
GRAPH_QUERY = "{name} compliance status"
INSIGHT_QUERY = "{name} conflict insight"


class SeparationParams(ExperimentParams):
    accounts: int = Field(100, ge=1, le=MAX_ACCOUNTS)
    top_k: list[int] = Field(default_factory=lambda: [1, 5, 20])
    fanout_top_k: list[int] = Field(default_factory=lambda: [2, 5])
    graph_top_k: int = Field(10, ge=1, le=20)
    insight_top_k: int = Field(5, ge=1, le=20)
    settle_s: float = Field(0.5, ge=0, description="wait between the writes and the reads")

    @field_validator("top_k", "fanout_top_k")
    @classmethod
    def _valid_top_k(cls, value: list[int]) -> list[int]:
        if not value or any(not 1 <= k <= 20 for k in value) or len(set(value)) != len(value):
            raise ValueError("top_k must be a non-empty list of distinct values in 1..20")
        return sorted(value)


@dataclass(frozen=True)
class Account:
    index: int
    name: str
    kind: Literal["conflict", "cleared", "hold_only"]
    details: tuple[tuple[str, str], ...]

    @property
    def record_kinds(self) -> tuple[str, ...]:
        return KIND_RECORDS[self.kind]

    def content(self, record_kind: str) -> str:
        return TEMPLATES[record_kind].format(name=self.name, **dict(self.details))


@dataclass(frozen=True)
class SeparationPlan:
    accounts: tuple[Account, ...]
    top_k: tuple[int, ...]

    def of_kind(self, *kinds: str) -> list[Account]:
        return [a for a in self.accounts if a.kind in kinds]


def account_name(index: int) -> str:
    return f"{_PREFIXES[index % len(_PREFIXES)]} {_SUFFIXES[index // len(_PREFIXES)]}"


def make_plan(params: SeparationParams) -> SeparationPlan:
    kinds = rng(params.seed, "separation:kinds")
    draws = rng(params.seed, "separation:details")
    accounts = []
    pattern: list[str] = []
    for index in range(params.accounts):
        if not pattern:
            pattern = list(_KIND_PATTERN)
            kinds.shuffle(pattern)
        details = (("stage", draws.choice(_STAGES)), ("amount", str(draws.randint(20, 400))),
                   ("close", draws.choice(_CLOSES)), ("product", draws.choice(_PRODUCTS)),
                   ("dpa", f"2026-{draws.randint(1, 12):02d}-{draws.randint(1, 28):02d}"),
                   ("years", str(draws.randint(1, 9))))
        accounts.append(Account(index, account_name(index), pattern.pop(), details))
    return SeparationPlan(tuple(accounts), tuple(params.top_k))


def planned_counts(plan: SeparationPlan, fanout_ks: Sequence[int]) -> dict[str, int]:
    n = len(plan.accounts)
    conflicts = len(plan.of_kind("conflict"))
    writes = sum(len(a.record_kinds) for a in plan.accounts)
    probes = n * len(QUERIES) * len(plan.top_k)
    return {
        "agent": len(AGENTS), "entity": n + 1, "write": writes, "probe": probes,
        "fanout": conflicts * 4 * len(fanout_ks), "reserved": len(AGENTS) * len(RESERVED_TYPES),
        "insight_generate": 1, "graph_probe": 2 * n,
        # one insight per conflict account, if the server finds them all: Vera and Lex each
        # read it by id and by search and try the other domain's record by id
        "insight_read": conflicts * 2 * 3, "insight_access": conflicts * 2 * 3,
        "contamination": probes, "absence": len(plan.of_kind("hold_only")) * 2 * len(plan.top_k),
        "attribution": conflicts * 2 * len(fanout_ks),
        "reserved_check": len(AGENTS) * len(RESERVED_TYPES),
        "graph_reach": 2 * n,
    }
