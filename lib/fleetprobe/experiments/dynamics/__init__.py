"""Governance over time: revocation, trust changes, moves, expiry and forgetting.

Every other experiment judges a frozen world. This one builds the seeded world it shares
with `matrix` (`fleetprobe.world`, the same phases), then applies a timeline of changes
(`timeline.CHANGES`: a key revoked; an agent deleted, re-created under the same id, its trust
lowered 3 -> 1 and 2 -> 0 or raised 1 -> 3, re-homed; a row soft-deleted, past its
`expires_at`, redistributed; a bulk write in flight across an agent's deletion or a key's
revocation), each while the world's probes run on every path that can still reach what
changed, and after it. The checker (`check`) judges each answer by the policy at the moment
the server gave it (`fleetprobe.oracle.policy.Timeline`).
"""

from fleetprobe.experiments.dynamics.check import judge, timeline_from
from fleetprobe.experiments.dynamics.run import Dynamics, DynamicsParams
from fleetprobe.experiments.dynamics.timeline import CHANGES, make_plan

__all__ = ["CHANGES", "Dynamics", "DynamicsParams", "judge", "make_plan", "timeline_from"]
