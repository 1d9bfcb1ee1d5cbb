"""Everything a request handler needs, built once per server process."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from fastapi import Request

from ..governance.auth import Caller, KeyRegistry, hash_key
from ..governance.profiles import Profile
from ..governance.ratelimit import RateLimited, RateLimiter, Window
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

    def rate_limit(self, bucket: str, caller: Caller, raw_key: str | None,
                   path: str | None = None) -> dict[str, str]:
        """Counts the request in its bucket (429 when full); returns the rate-limit headers
        the profile sends on the answer of `path` (default: the bucket's name)."""
        per_tenant = self.profile.rate_limit_key == "tenant" and caller.tenant_id
        # MemClaw keys its limiter by sha256(key)[:32]: the raw key is never held here
        key = (f"tenant:{caller.tenant_id}" if per_tenant
               else f"key:{hash_key(raw_key or '')[:32]}")
        real = self.profile.rate_limit_headers == "window"
        try:
            window = self.limiter.hit(bucket, key)
        except RateLimited as refused:
            if real:  # MemClaw's limiter sends no headers (slowapi's are off)
                refused.headers = window_headers(refused.window) | {
                    "Retry-After": str(max(1, math.ceil(refused.window.reset_after_s)))}
            raise
        if (path or bucket) not in self.profile.rate_limit_header_paths:
            return {}
        if real:
            return window_headers(window)
        # MemClaw's open-source usage meter reports no limit; its routes send str(None)
        return {"X-RateLimit-Limit": "None", "X-RateLimit-Remaining": "None"}

    def agent_of(self, caller: Caller) -> AgentRow | None:
        if caller.agent_id is None or caller.tenant_id is None:
            return None
        return self.storage.get_agent(caller.tenant_id, caller.agent_id)


def window_headers(window: Window) -> dict[str, str]:
    return {"X-RateLimit-Limit": str(window.limit),
            "X-RateLimit-Remaining": str(window.remaining)}


async def state_of(request: Request) -> ServerState:  # async: no worker-thread hop
    return request.app.state.server
