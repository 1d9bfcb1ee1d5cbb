"""What a target allows the world and its probes: the bundled server's rate limits lifted
(the world is built and probed unpaced there), and why a probe means nothing on a target
(its credential shape, or a world-building step it did not do)."""

from __future__ import annotations

from fleetprobe.harness.experiment import ClientParams, ExperimentParams, RunContext
from fleetprobe.harness.targets import TargetParams
from fleetprobe.world.plan import ProbeSpec
from fleetprobe.world.wire import Wire, world

LIFTED_RATE = "1000000/minute"
NA_NAMED = ("the tenant is asserted (X-Tenant-ID): naming the row's tenant is speaking as "
            "that tenant, so there is no tenant boundary to cross")
NA_WHOAMI = ("the agent identity is asserted (X-Agent-ID): naming another agent is speaking "
             "as it, so whoami has no other identity to report")
NA_GHOST = ("agent identities are provisioned keys on this target: an agent id nobody "
            "registered has no credential to speak with")


def lifted(t: TargetParams) -> TargetParams:
    """The bundled server's target with its rate limits lifted (others unchanged)."""
    if t.kind != "reference":
        return t
    return t.model_copy(update={"write_rate": t.write_rate or LIFTED_RATE,
                                "search_rate": t.search_rate or LIFTED_RATE,
                                "bulk_rate": t.bulk_rate or LIFTED_RATE})


def not_applicable(ctx: RunContext, w: Wire, probe: ProbeSpec) -> str | None:
    """Why a probe means nothing on this target: a world-building step a backend answered
    "not supported", a link the target did not keep, or the credential shape."""
    who = world(ctx).principals[probe.who]
    asserted = ctx.tenant.asserts_identity
    if not who.registered and not asserted:
        return NA_GHOST
    if probe.row in w.unbuilt:
        return f"its row was not built as planned: {w.unbuilt[probe.row]}"
    if probe.path == "bulk_attempt" and probe.row not in w.attempts and "bulk" in w.unsupported:
        return f"no bulk attempt id to replay: {w.unsupported['bulk']}"
    if probe.path == "entity" and "entity" in w.unsupported:
        return f"no entity linked to the row: {w.unsupported['entity']}"
    if probe.path == "entity" and probe.row in w.unlinked:
        return w.unlinked[probe.row]
    if probe.variant == "named" and asserted:
        return NA_NAMED
    if probe.path == "whoami" and asserted:
        return NA_WHOAMI
    return None


def unpaced_client(params: ExperimentParams) -> ClientParams:
    """Unpaced against the bundled server (its limits are lifted) and a backend adapter
    (no rate limits); a live target keeps the params' pacing, below its rate limits."""
    if params.target.kind not in ("reference", "backend"):
        return params.client
    return params.client.model_copy(update={
        "writes_per_s": None, "bulk_per_s": None, "searches_per_s": None})
