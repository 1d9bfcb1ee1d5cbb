"""Agent identities where a target has no agent-key provisioning.

A self-hosted MemClaw (gate key or header trust) has no `/admin/agent-keys/provision` route:
an agent identity is whatever `X-Agent-ID` the client asserts, and an agent row exists once
the agent has written (MemClaw auto-creates it at trust 1, home fleet = that write's fleet).
`register_asserted_agent` does exactly that, then sets the requested trust and home fleet
with `PATCH /api/v1/agents/{id}/trust` under the tenant credential (no agent identity), so
the same probes run as on a managed gateway with self-provisioned agent keys.
"""

from __future__ import annotations

from typing import Any

from fleetprobe.client import Credential, Result
from fleetprobe.harness.seeding import salted

ASSERTED, PROVISIONED = "asserted", "provisioned"


def registration_body(agent_id: str, fleet_id: str, nonce: str) -> dict[str, Any]:
    """A private (`scope_agent`) row, so no probe of the run can see it."""
    return {"agent_id": agent_id, "fleet_id": fleet_id, "visibility": "scope_agent",
            "write_mode": "fast",
            "content": salted(f"fleetprobe registers probe agent {agent_id} in its home "
                              f"fleet {fleet_id}", nonce)}


async def register_asserted_agent(ctx: Any, agent_id: str, fleet_id: str, trust: int,
                                  purpose: str) -> tuple[Result, Credential | None]:
    """Register `agent_id` by writing as it, then set its trust; returns the trust PATCH's
    result and the credential that asserts the identity (None when either step failed).
    The write is recorded as a `register` event; the caller records the outcome."""
    tenant: Credential = ctx.tenant
    cred = tenant.as_agent(agent_id, trust)
    wrote = await ctx.client.write(cred, registration_body(agent_id, fleet_id, ctx.nonce))
    ctx.record("register", wrote, agent=agent_id, fleet=fleet_id, trust=trust,
               purpose=purpose, identity=ASSERTED)
    if not wrote.ok:
        return wrote, None
    patched = await ctx.client.patch_trust(tenant, agent_id, trust, fleet_id)
    return patched, cred if patched.ok else None
