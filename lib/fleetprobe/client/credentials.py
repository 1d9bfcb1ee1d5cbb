"""Who a request speaks as: a `Credential` in the shapes MemClaw deploys. Its repr hides the
key, so a credential can be logged or recorded without leaking it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

CredentialKind = Literal["tenant", "agent", "gate", "headers"]
# Kinds whose agent identity is asserted by the client in `X-Agent-ID` (a self-hosted engine
# without the managed gateway), so one credential can speak as any agent of its tenant.
ASSERTED_IDENTITY_KINDS: frozenset[str] = frozenset({"gate", "headers"})


@dataclass(frozen=True)
class Credential:
    """Who a request speaks as, in the three shapes MemClaw deploys.

    Managed gateway (memclaw.net, on-prem gateway): `tenant`, a tenant-scoped `X-API-Key`
    (no agent identity), and `agent`, an agent-scoped key the gateway binds to one agent
    (self-provisioned). Self-hosted engine with a shared gate key (`MEMCLAW_API_KEY` set on
    the server): `gate`, that key as `X-API-Key` plus `X-Tenant-ID` and, when speaking as an
    agent, a client-asserted `X-Agent-ID`. Self-hosted engine without a gate key: `headers`,
    `X-Tenant-ID` / `X-Agent-ID` alone, no key at all.
    """

    kind: CredentialKind
    tenant_id: str
    key: str | None = field(default=None, repr=False)
    agent_id: str | None = None
    trust: int | None = None

    @property
    def asserts_identity(self) -> bool:
        """True when the agent identity is a header this client chooses (gate, headers)."""
        return self.kind in ASSERTED_IDENTITY_KINDS

    def as_agent(self, agent_id: str, trust: int | None = None) -> Credential:
        """The same tenant credential speaking as `agent_id` in `X-Agent-ID`. Only for
        asserted-identity kinds: a key-based credential needs its own agent key."""
        if not self.asserts_identity:
            raise ValueError(f"a {self.kind} credential cannot assert an agent identity; "
                             "provision an agent key instead")
        return replace(self, agent_id=agent_id, trust=trust)

    def headers(self) -> dict[str, str]:
        if self.asserts_identity:
            hdrs = {"X-Tenant-ID": self.tenant_id}
            if self.agent_id:
                hdrs["X-Agent-ID"] = self.agent_id
            if self.kind == "gate":
                if not self.key:
                    raise ValueError(f"gate credential for tenant {self.tenant_id!r} has no key")
                hdrs["X-API-Key"] = self.key
            return hdrs
        if not self.key:
            raise ValueError(f"{self.kind} credential for tenant {self.tenant_id!r} has no key")
        return {"X-API-Key": self.key}
