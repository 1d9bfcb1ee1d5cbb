"""Contradiction experiment (paper 7.2, 8.4, 9.2): does the server supersede a fact when two
writes assert different values for the same single-valued predicate, and how many such writes
does it admit in the first place?

Plan. `n_facts` facts cycle through `TEMPLATES` (20 subject-predicate pairs on predicates in
MemClaw's `SINGLE_VALUE_PREDICATES`, the list its engine ships). Fact `i` uses template
`i % 20` and its own subject entity (`<stem>-<a word spelled from i>`, run-scoped by the
nonce, upserted once); content is
salted by the nonce. Every fact runs two scenarios, `sequential` (write 0,
`sequential_delay_s`, write 1) then `concurrent` (writes 0 and 1 dispatched together), each
pair asserting two different `object_value`s (`A` then `B`, drawn per fact from the template's
pool by the seed). Both scenarios assert the same `A`, `B`.

Prose (what each write's `content` says; the triple fields are the same in every mode):
- `prose_diversity="low"`: write `i` of both scenarios uses sentence frame `i`, so the concurrent
  pair repeats the sequential pair's sentences verbatim. This is the generator the paper's
  "dominated by exact-content duplicates" suggests: with one writer per fact the concurrent pair
  meets MemClaw's exact-duplicate check (tenant + fleet + agent + content hash).
- `prose_diversity="high"`: the four writes use four different frames, so no two writes of a
  fact share a sentence apart from the subject, predicate phrase and value.
- `pair_prose="frames"` (default): the frames above are short, distinct sentences, so the two
  writes of a pair are not near-duplicates of each other.
- `pair_prose="value_only"`: both writes of a pair use one long shared paragraph that differs
  only in the object value (scenario `s` uses long frame `s` under `high`, frame 0 under `low`),
  so their cosine sits above a strong-mode near-duplicate gate: the paper's 9.2 case, "X is A"
  then "X is B".

Writers. `writer_assignment="per_fact"` (default): one agent writes all four writes of a fact
(the paper does not say; one writer per fact is the simplest reading), agents cycle through a
pool of `n_writer_agents` in one fleet. `per_scenario`: the two scenarios of a fact use two
different agents, which takes MemClaw's agent-scoped exact-duplicate check out of play; under
`prose_diversity="low"` the repeated sentences then meet the strong-mode near-duplicate gate
(which compares across agents) instead, so the paper's "dominated by exact-content duplicates"
fits one writer per fact.

Schedule. Entities first; then each fact writes its two pairs (`fact_concurrency` facts at a
time), waits `settle_s` and runs its two stale reads (an active-only search per fact-run), so
the searches of early facts overlap the writes of later ones; then one GET re-fetch of every
admitted row, by which time every fact's settle window has passed.

Checkers judge the recorded events only: a fact-run is `detected` when a post-settle GET of one
of its admitted rows shows `supersedes_id` set or a status other than `active`.
"""

from __future__ import annotations

from fleetprobe.harness.experiment import Checker, Experiment, Phase, register

from .check import (  # noqa: F401 - the package's face
    REJECT_MESSAGES,
    active_rows_of,
    check_fact_runs,
    is_stale,
    judge_fact_run,
    reject_reason,
)
from .phases import (  # noqa: F401 - the package's face
    refetch_admitted,
    upsert_subjects,
    write_pairs,
)
from .plan import (  # noqa: F401 - the package's face
    CONTRADICTION_FLEET,
    EXPERIMENT,
    FRAMES,
    LONG_FRAMES,
    SCENARIOS,
    TEMPLATES,
    ContradictionParams,
    ContradictionPlan,
    FactTemplate,
    PairProse,
    PlannedFact,
    PlannedWrite,
    ProseDiversity,
    WriterAssignment,
    fact_key,
    frame_for,
    make_plan,
    stale_read_query,
    write_body,
    writer_for,
)


@register
class Contradiction(Experiment):
    name = EXPERIMENT
    Params = ContradictionParams

    def make_plan(self, params: ContradictionParams) -> ContradictionPlan:
        return make_plan(params)

    def planned_counts(self, plan: ContradictionPlan,
                       params: ContradictionParams) -> dict[str, int]:
        return plan.planned_counts

    def phases(self) -> list[Phase]:
        return [upsert_subjects, write_pairs, refetch_admitted]

    def checkers(self) -> list[Checker]:
        return [check_fact_runs]
