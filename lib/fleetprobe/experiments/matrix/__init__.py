"""Governance matrix: every principal x every path x every scope, judged against one policy.

The paper measured two read paths with two credential kinds (section 8.1) and lists the
adversarial matrix as future work (section 10). This experiment builds it for any
MemClaw-compatible target, in four modules:

1. `world`: a seeded world: several tenants with the same, deliberately confusable fleet
   names, agents at every trust level in every fleet plus home-less and unregistered agents,
   rows of every visibility and status (each with words of its own), supersession chains,
   entity links, soft-deleted rows, rows an agent wrote outside its home fleet;
2. `build`: the world made on the target the way it makes principals (agent keys, or writes
   that assert the agent), then a census: the target's own account of every agent (trust,
   home fleet), row (fleet, visibility, owner, status) and entity link, recorded as events;
3. `probes` (sent by `run`): the enumerated matrix plus `random_probes` seeded ones, each one
   request in its principal's lane, with the agent read back after probes that may change
   it, and control requests to ids that do not exist (existence oracles);
4. `check`: one verdict per probe from the recorded events only, against the declarative
   policy in `fleetprobe.policy`.

Rate limits are lifted for this experiment on the bundled server (the client does not pace);
the manifest's target entry records the limits the server reported. Optional paper-scale
probes (`paper_fleets`, paper section 7.1's design) restate the paper's GET and search rates
with N = 2 F^2 K probes each.
"""

from fleetprobe.experiments.matrix.check import endpoint_absent, judge_probe, world_from
from fleetprobe.experiments.matrix.probes import CONTROL_PATHS, PROBES
from fleetprobe.experiments.matrix.run import Matrix, MatrixParams, Plan, make_plan

__all__ = ["CONTROL_PATHS", "PROBES", "Matrix", "MatrixParams", "Plan", "endpoint_absent",
           "judge_probe", "make_plan", "world_from"]
