"""Leakage experiment (paper section 7.1, Table 2 leakage rows, Table 3, section 9.1).

Three probe families, each judged only from what the server returned:

- bulk (`probe`): F fleets x K agents; each fleet's owner writes a fleet-scoped and an
  agent-scoped secret (canary in metadata, distinct prose); every agent probes every secret
  by search (its fleet in `fleet_ids`, query = the secret's prose) and by GET-by-id, with
  the tenant key. Run once per search-leak hypothesis variant (`variant_write` x
  `variant_search`, docs/search-leak.md), each variant in a fleet namespace of its own so
  variants cannot see each other's secrets through scope, and (`variant_tenants`, where the
  target can create tenants) in a tenant of its own, so the variants run side by side, each
  within the paper's per-tenant rate limits, instead of one after another.
- Table 3 (`agent_probe`): agents at trust 1 and 2 in fleet-0 GET a fleet-1 row, plus the
  trust-1 same-fleet control and the tenant key. An agent speaks through a self-provisioned
  agent key (managed gateway) or, on a self-hosted engine, through an asserted `X-Agent-ID`
  after registering by writing as itself (`fleetprobe.harness.identities`); the events and the
  manifest (`target.identity_mechanism`) say which.
- remediation re-probe (`reprobe`, paper 9.1): per fleet a trust-1 and a trust-2 agent key,
  each GETs every fleet's target rows (paper: 4 fleets x 3 rows, 96 probes).

Ground truth comes from the scope rules (a fleet secret is for its fleet, an agent secret for
its author; cross-fleet GET needs trust >= 2). `returned` is observed (the probed row, by id
or canary, in the answer); `leak`/`miss` follow from `expected` and `returned` (`judge`).
An answer that never arrived (transport error, 5xx or 429 after retries) stays unjudged.

Modules: `plan` (params, plan, ground truth), `phases` (writes and probes), `check` (judging
an answer). The experiment is registered here; its public names stay importable from
`fleetprobe.experiments.leakage`.
"""

from __future__ import annotations

from fleetprobe.harness.experiment import Checker, Experiment, Phase, register

from .check import (  # noqa: F401 - the package's face
    answered,
    get_returned,
    judge,
    search_returned,
)
from .phases import (  # noqa: F401 - the package's face
    agent_probes,
    bulk_probes,
    canary_for,
    open_tenants,
    search_body,
    settle,
    write_rows,
)
from .plan import (  # noqa: F401 - the package's face
    ALL_VARIANTS,
    ENDPOINT_MISSING,
    AgentBlock,
    AgentProbe,
    BulkProbe,
    KeyedAgent,
    LeakageParams,
    LeakagePlan,
    PlanAgent,
    PlannedRow,
    VariantBlock,
    VariantSearch,
    VariantWrite,
    expected_agent_get,
    expected_bulk,
    make_plan,
    prose,
    relation_of,
)


@register
class Leakage(Experiment):
    name = "leakage"
    Params = LeakageParams

    def make_plan(self, params: LeakageParams) -> LeakagePlan:
        return make_plan(params)

    def planned_counts(self, plan: LeakagePlan, params: LeakageParams) -> dict[str, int]:
        return plan.planned_counts()

    def phases(self) -> list[Phase]:
        return [open_tenants, write_rows, settle, bulk_probes, agent_probes]

    def checkers(self) -> list[Checker]:
        # leak/miss are judged per probe by `judge` from the observed `returned` as each
        # probe event is recorded (EVENTS.md puts them on the probe event itself).
        return []
