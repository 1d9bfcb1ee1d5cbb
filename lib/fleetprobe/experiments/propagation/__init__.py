"""Propagation experiment (paper 7.4, 8.3, 9.3, 9.4): does a fleet-scoped fact reach the
writer's fleet siblings, stay out of other fleets, how fast does it become visible, and can it
be re-homed onto another agent?

Plan (seeded; the nonce salts content and canaries):
- one writer agent and `n_siblings` sibling readers in the writer's fleet; `n_foreign` foreign
  readers, each in its own other fleet of the same tenant;
- rate phase: the writer writes `n_rate_facts` fleet-scoped facts, one per statement of
  `RATE_STATEMENTS`, each with a unique canary in `metadata.canary`; every sibling then polls
  `/search` (its fleet in `fleet_ids`, query = the fact's prose) until the canary appears or
  `sibling_deadline_s` passes; every foreign reader searches once (any hit is a leak);
- window phase: `n_window_facts` dedicated facts (`WINDOW_STATEMENTS`, distinct prose), one at
  a time: write, then one sibling polls from write completion every `window_poll_interval_s`
  until visible or `window_deadline_s`. The first poll's search-pacing slot is taken before
  the write, so it leaves the moment the write returns; later polls still obey the client's
  search pacing (below the server's limit), so under a tight budget they are spaced at
  max(`window_poll_interval_s`, 1 / `client.searches_per_s`);
- redistribute subset: `n_redistribute_sibling` rate facts re-homed onto a sibling and
  `n_redistribute_cross_fleet` onto a foreign reader, requested by the writer at
  `requester_trust`; a GET then shows whether `agent_id` flipped.

Readers search as themselves: `reader_credential="agent"` gives each reader its own agent
identity, a self-provisioned agent key on a managed gateway (the way the paper did) or, on a
self-hosted engine (target auth `gate`/`headers`), an asserted `X-Agent-ID` after the reader
registered by writing as itself (`fleetprobe.harness.identities`); `"tenant"` uses the tenant
credential with the reader's fleet in `fleet_ids` and no `filter_agent_id` (an author filter
that would hide the writer's rows); such readers are registered once by a search that names
them (see `setup_readers`).

Every judgement (`visible`, `leak`, `flipped`) is made by the pure functions of
`check` from the response it judges, as the event is recorded.
"""

from __future__ import annotations

from functools import partial

from fleetprobe.harness.experiment import Checker, Experiment, Phase, register

from .check import (  # noqa: F401 - the package's face
    canary_seen,
    judge_flip,
    judge_probe,
    moved_count,
    observed_visibility,
)
from .phases import (  # noqa: F401 - the package's face
    Readers,
    measure_window,
    probe_rate_facts,
    redistribute_subset,
    setup_readers,
    write_rate_facts,
)
from .plan import (  # noqa: F401 - the package's face
    EXPERIMENT,
    RATE_STATEMENTS,
    WINDOW_STATEMENTS,
    Agent,
    PlannedFact,
    PlannedRedistribute,
    PropagationParams,
    PropagationPlan,
    ReaderCredential,
    make_plan,
    search_body,
    wire_canary,
    write_body,
)


@register
class Propagation(Experiment):
    name = EXPERIMENT
    Params = PropagationParams

    def make_plan(self, params: PropagationParams) -> PropagationPlan:
        return make_plan(params)

    def planned_counts(self, plan: PropagationPlan, params: PropagationParams) -> dict[str, int]:
        return plan.planned_counts

    def phases(self) -> list[Phase]:
        readers = Readers()  # one per run: phases() is called once per run
        return [partial(setup_readers, readers=readers), write_rate_facts,
                partial(probe_rate_facts, readers=readers),
                partial(measure_window, readers=readers), redistribute_subset]

    def checkers(self) -> list[Checker]:
        return []  # every judgement is made from the response it judges, as it is recorded
