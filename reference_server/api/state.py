"""Everything a request handler needs, built once per server process."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from ..governance.auth import Caller, KeyRegistry, hash_key
from ..governance.profiles import Profile
from ..governance.ratelimit import RateLimiter
from ..pipeline.contradiction import ContradictionDetector
from ..pipeline.embedding import Embedder
from ..pipeline.latency import LatencySimulator
from ..storage import AgentRow, Storage


@dataclass
class ServerState:
    profile: Profile
    storage: Storage
    embedder: Embedder
    keys: KeyRegistry
    limiter: RateLimiter
    detector: ContradictionDetector
    latency: LatencySimulator | None = None
    # (tenant, Idempotency-Key) of writes still running (they may await simulated latency)
    idempotency_in_flight: set[tuple[str, str]] = field(default_factory=set)

    def rate_limit(self, bucket: str, caller: Caller, raw_key: str | None) -> None:
        per_tenant = self.profile.rate_limit_key == "tenant" and caller.tenant_id
        # MemClaw keys its limiter by sha256(key)[:32]: the raw key is never held here
        key = (f"tenant:{caller.tenant_id}" if per_tenant
               else f"key:{hash_key(raw_key or '')[:32]}")
        self.limiter.hit(bucket, key)

    def agent_of(self, caller: Caller) -> AgentRow | None:
        if caller.agent_id is None or caller.tenant_id is None:
            return None
        return self.storage.get_agent(caller.tenant_id, caller.agent_id)


async def state_of(request: Request) -> ServerState:  # async: no worker-thread hop
    return request.app.state.server
