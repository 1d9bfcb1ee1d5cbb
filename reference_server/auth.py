"""Credentials: the server plays MemClaw's gateway and resolves `X-API-Key` itself.

A key resolves to the admin, a tenant (tenant key: no agent identity) or a tenant + agent
(agent key: the agent, its trust and home fleet come from the agent row). Keys are stored
as sha256 hashes only. A client-supplied `X-Agent-ID` header is never read.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass

from fastapi import Request

from .errors import ApiError
from .storage import KeyRow, Storage, now_iso

KEY_PREFIX = "mc_"


def new_raw_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    tenant_id: str | None
    agent_id: str | None = None  # verified identity (agent keys only)
    is_admin: bool = False
    kind: str = "tenant_key"  # admin | tenant_key | agent_key

    def enforce_tenant(self, tenant_id: str) -> None:
        if not self.is_admin and tenant_id != self.tenant_id:
            raise ApiError(403, f"API key is not authorized for tenant '{tenant_id}'")

    def enforce_readable_tenant(self, tenant_id: str) -> None:
        if not self.is_admin and tenant_id != self.tenant_id:
            raise ApiError(403, f"API key is not authorized to read tenant '{tenant_id}'")

    def enforce_not_agent(self, action: str) -> None:
        if self.kind == "agent_key":
            raise ApiError(403, f"Agent-scoped credentials cannot {action}; "
                                "use an admin credential.")


class KeyRegistry:
    def __init__(self, storage: Storage, admin_key: str) -> None:
        self.storage = storage
        self._admin_hash = hash_key(admin_key)

    def mint(self, tenant_id: str, agent_id: str | None = None, label: str | None = None,
             raw_key: str | None = None) -> tuple[str, KeyRow]:
        raw = raw_key or new_raw_key()
        row = KeyRow(id=str(uuid.uuid4()), tenant_id=tenant_id, agent_id=agent_id,
                     kind="agent_key" if agent_id else "tenant_key",
                     key_prefix=raw[:10], created_at=now_iso())
        self.storage.add_key(hash_key(raw), row, label)
        return raw, row

    def resolve(self, raw_key: str | None) -> Caller:
        if not raw_key:
            raise ApiError(401, "Missing API key. Include X-API-Key header.")
        digest = hash_key(raw_key)
        if hmac.compare_digest(digest, self._admin_hash):
            return Caller(tenant_id=None, is_admin=True, kind="admin")
        row = self.storage.find_key(digest)
        if row is None:
            raise ApiError(401, "Invalid API key.")
        return Caller(tenant_id=row.tenant_id, agent_id=row.agent_id, kind=row.kind)

    def peek(self, raw_key: str | None) -> Caller | None:
        """Resolve without raising (for /whoami, which always answers 200)."""
        try:
            return self.resolve(raw_key)
        except ApiError:
            return None


def caller_from(request: Request) -> Caller:
    """FastAPI dependency: the resolved caller, or 401."""
    registry: KeyRegistry = request.app.state.server.keys
    return registry.resolve(request.headers.get("x-api-key"))
