"""Credentials, in the three shapes MemClaw deploys (`--auth`):

`gateway` (default): the server plays MemClaw's managed gateway and resolves `X-API-Key`
itself. A key resolves to the admin, a tenant (tenant key: no agent identity) or a tenant +
agent (agent key: the agent, its trust and home fleet come from the agent row). Keys are
stored as sha256 hashes only. A client-supplied `X-Agent-ID` header is never read.

`gate`: a self-hosted engine with a shared gate key (MemClaw's `MEMCLAW_API_KEY`): every
request sends that key as `X-API-Key` (else 401 `Missing API key. Include X-API-Key
header.` / `Invalid API key.`), the tenant as `X-Tenant-ID` and, optionally, a
client-asserted `X-Agent-ID` that becomes the caller's agent identity.

`headers`: a self-hosted engine without a gate key (MemClaw's header-trust path): no key;
`X-Tenant-ID` is required (else 401 `Missing API key or X-Tenant-ID header.`) and
`X-Agent-ID` is the asserted identity.

In every mode the admin key (`X-API-Key`) resolves to the admin and ignores `X-Agent-ID`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import Literal

from fastapi import Request
from starlette.datastructures import Headers

from ..storage import KeyRow, Storage, now_iso
from ..wire.errors import ApiError

KEY_PREFIX = "mc_"
AuthMode = Literal["gateway", "gate", "headers"]
AUTH_MODES: tuple[str, ...] = ("gateway", "gate", "headers")


def new_raw_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Caller:
    tenant_id: str | None
    agent_id: str | None = None  # verified (agent key) or asserted (X-Agent-ID) identity
    is_admin: bool = False
    kind: str = "tenant_key"  # admin | tenant_key | agent_key | gate | headers

    def enforce_tenant(self, tenant_id: str) -> None:
        if not self.is_admin and tenant_id != self.tenant_id:
            raise ApiError(403, f"API key is not authorized for tenant '{tenant_id}'")

    def enforce_readable_tenant(self, tenant_id: str) -> None:
        if not self.is_admin and tenant_id != self.tenant_id:
            raise ApiError(403, f"API key is not authorized to read tenant '{tenant_id}'")

    def enforce_not_agent(self, action: str) -> None:
        """An agent key, or a gate/header credential carrying an agent identity."""
        if self.agent_id is not None:
            raise ApiError(403, f"Agent-scoped credentials cannot {action}; "
                                "use an admin credential.")


class KeyRegistry:
    def __init__(self, storage: Storage, admin_key: str, mode: AuthMode = "gateway",
                 gate_key: str | None = None) -> None:
        if mode not in AUTH_MODES:
            raise ValueError(f"unknown auth mode {mode!r}; choose one of {AUTH_MODES}")
        if mode == "gate" and not gate_key:
            raise ValueError("auth mode 'gate' needs a gate key")
        self.storage = storage
        self.mode = mode
        self._admin_hash = hash_key(admin_key)
        self._gate_hash = hash_key(gate_key) if gate_key else None

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

    def resolve_request(self, headers: Headers) -> Caller:
        """The caller a request speaks as, under this server's auth mode."""
        raw_key = headers.get("x-api-key")
        if self.mode == "gateway":
            return self.resolve(raw_key)
        if raw_key and hmac.compare_digest(hash_key(raw_key), self._admin_hash):
            return Caller(tenant_id=None, is_admin=True, kind="admin")
        if self.mode == "gate":
            if not raw_key:
                raise ApiError(401, "Missing API key. Include X-API-Key header.")
            if self._gate_hash is None or not hmac.compare_digest(hash_key(raw_key),
                                                                  self._gate_hash):
                raise ApiError(401, "Invalid API key.")
            # MemClaw's shared gate: tenant from X-Tenant-ID (or none), identity asserted
            return Caller(tenant_id=headers.get("x-tenant-id") or None,
                          agent_id=headers.get("x-agent-id") or None, kind="gate")
        tenant = headers.get("x-tenant-id")
        if not tenant:
            raise ApiError(401, "Missing API key or X-Tenant-ID header.")
        return Caller(tenant_id=tenant, agent_id=headers.get("x-agent-id") or None,
                      kind="headers")

    def grant_withdrawn(self, caller: Caller, raw_key: str | None, tenant_id: str,
                        agent_id: str | None) -> str | None:
        """Why a request that was authorised at its start no longer is (None: it still is):
        its agent key revoked, or the agent it writes as deleted. Asked between the items of
        a long request (a bulk write) by a profile that stops at a revocation."""
        if caller.kind == "agent_key" and raw_key and self.storage.find_key(
                hash_key(raw_key)) is None:
            return "the API key was revoked"
        if agent_id is not None and self.storage.get_agent(tenant_id, agent_id) is None:
            return f"agent '{agent_id}' was deleted"
        return None

    def peek(self, headers: Headers) -> Caller | None:
        """Resolve without raising (for /whoami, which always answers 200)."""
        try:
            return self.resolve_request(headers)
        except ApiError:
            return None


async def caller_from(request: Request) -> Caller:
    """FastAPI dependency: the resolved caller, or 401. Async, so FastAPI runs its key lookup
    on the loop (as the write path's storage calls run) instead of a worker-thread hop. A
    profile that models MemClaw's open engine (`agent_id_from_header`) takes a tenant key's
    client-sent X-Agent-ID as the caller's identity, as that engine's shared-gate path does."""
    state = request.app.state.server
    caller = state.keys.resolve_request(request.headers)
    asserted = request.headers.get("x-agent-id")
    if asserted and caller.kind == "tenant_key" and state.profile.agent_id_from_header:
        return Caller(tenant_id=caller.tenant_id, agent_id=asserted, kind="tenant_key")
    return caller
