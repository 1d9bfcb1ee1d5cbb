"""Governance matrix: every principal x every path x every scope, judged against one policy.

The paper measured two read paths with two credential kinds (section 8.1) and lists the
adversarial matrix as future work (section 10). This experiment builds it for any
MemClaw-compatible target. The world it probes is `fleetprobe.world` (shared with
`dynamics`): several tenants with the same, deliberately confusable fleet names, agents at
every trust level in every fleet plus home-less and unregistered agents, rows of every
visibility and status, made on the target and read back by a census. This package adds:

1. `probe_plan`: the enumerated matrix plus `random_probes` seeded ones (and the paper-scale
   plan);
2. `run`: each probe sent as one request in its principal's lane, with the agent read back
   after probes that may change it, and control requests to ids that do not exist
   (existence oracles);
3. `check`: one verdict per probe from the recorded events only, against the declarative
   policy in `fleetprobe.oracle.policy`.

Rate limits are lifted for this experiment on the bundled server (the client does not pace);
the manifest's target entry records the limits the server reported. Optional paper-scale
probes (`paper_fleets`, paper section 7.1's design) restate the paper's GET and search rates
with N = 2 F^2 K probes each.
"""

from fleetprobe.experiments.matrix.check import judge_probe
from fleetprobe.experiments.matrix.run import Matrix, MatrixParams, Plan, make_plan

__all__ = ["Matrix", "MatrixParams", "Plan", "judge_probe", "make_plan"]
