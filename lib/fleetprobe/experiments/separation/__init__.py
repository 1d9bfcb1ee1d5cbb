"""Separation experiment: storage-level versus prompt-level separation (Vera, Lex, Axis).

One tenant, three agents: Vera (sales; reads `fleet-sales` + `fleet-org-shared`), Lex
(legal; `fleet-legal` + `fleet-org-shared`) and Axis (admin; all three, home
`fleet-org-shared`, trust 2). A seeded population of N accounts, each of one kind:

- `conflict`: Vera's deal and call notes, Lex's GDPR hold, Axis's org-shared profile;
- `cleared`:  Vera's deal and call notes, Lex's clearance, Axis's profile;
- `hold_only`: Lex's GDPR hold and nothing else.

Every record is written by the agent owning its domain, names the account, and talks about
the same deal, contract and DPA, so a flat store's ranking has every chance to mix domains.
Sales deals and legal records carry a triple on the account (`commercial_progression`
proceed / halt), the structure the server's insights route reads.

Measured, without a language model, from what the server returned:

1. contamination: each of Vera's and Lex's recall and search queries about an account, at
   several `top_k`: returned records whose `fleet_id` lies outside the agent's authorised
   set (what would enter the model's context);
2. absence: on hold-only accounts, whether Vera's result says anything about the account
   ("no record in authorized partitions" is all an empty answer means);
3. Axis's fan-out: one recall over all three fleets versus three labelled per-fleet calls,
   for conflict accounts: can Axis name both parties with the right fleet from the response
   fields alone (and from the recall summary text alone);
4. reserved types: client writes of `insight`, `outcome`, `rule` refused with MemClaw's
   envelope (422 `INVALID_ARGUMENTS`) naming the server-side route;
5. insights: Axis runs `POST /insights/generate` (focus `contradictions`); Vera and Lex read
   the insights by id and by search, and try to read the other domain's underlying records;
6. graph reach: searches naming an account with `diagnostic: true`; rows the server says
   its entity-graph expansion reached, and whether any lies outside the caller's partitions.

Observations are recorded as they happen; the checkers judge them from the recorded events
(and the recorded writes as ground truth of which record lives where), never from the plan.

Modules: `plan` (agents, accounts, records, params), `phases` (the scenario and its probes),
`check` (the checkers). The experiment is registered here; its public names stay importable
from `fleetprobe.experiments.separation`.
"""

from __future__ import annotations

from fleetprobe.harness.experiment import Checker, Experiment, Phase, register

from .check import (  # noqa: F401 - the package's face
    check_attribution,
    check_contamination,
    check_graph,
    check_insights,
    check_reserved,
    judge_absence,
    judge_attribution,
    judge_contamination,
    judge_graph,
    judge_insight_read,
    judge_items,
    judge_reserved,
    summary_names,
    written_by_id,
)
from .phases import (  # noqa: F401 - the package's face
    Run,
    compact_items,
    contamination_probes,
    fanout_probes,
    generate_insights,
    graph_probes,
    insight_reads,
    reserved_writes,
    scenario,
    setup_agents,
    upsert_entities,
    write_records,
)
from .plan import (  # noqa: F401 - the package's face
    AGENT,
    AGENTS,
    DOMAIN_OF_FLEET,
    ENDPOINT_MISSING,
    FANOUT_QUERY,
    GRAPH_QUERY,
    HOLD_VISIBLE,
    INSIGHT_QUERY,
    KIND_RECORDS,
    LEGAL,
    MAX_ACCOUNTS,
    NO_RECORD,
    ORG,
    OTHER_RECORD,
    PREDICATE,
    QUERIES,
    RECORD_OBJECT,
    RECORD_WRITER,
    RESERVED_TYPES,
    ROUTE_NAMES,
    SALES,
    TEMPLATES,
    Account,
    AgentSpec,
    SeparationParams,
    SeparationPlan,
    account_name,
    make_plan,
    planned_counts,
)


@register
class Separation(Experiment):
    name = "separation"
    Params = SeparationParams

    def make_plan(self, params: SeparationParams) -> SeparationPlan:
        return make_plan(params)

    def planned_counts(self, plan: SeparationPlan, params: SeparationParams) -> dict[str, int]:
        return planned_counts(plan, params.fanout_top_k)

    def phases(self) -> list[Phase]:
        return [scenario]

    def checkers(self) -> list[Checker]:
        return [check_contamination, check_attribution, check_reserved, check_insights,
                check_graph]
