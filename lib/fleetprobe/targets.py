"""Where a run sends its requests: the bundled reference server, or a live endpoint.

`reference`: starts `reference_server` on a free loopback port with the params' profile,
creates a fresh tenant for the run, stops the server afterwards.
`live`: base URL, key and tenant from the environment (`MEMCLAW_API_URL`, `MEMCLAW_API_KEY`,
`MEMCLAW_TENANT_ID`), never from a file. The harness has no delete call at all, so a live
run cannot remove data it did not write.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fleetprobe.client import Credential, MemClawClient

ENV_URL = "MEMCLAW_API_URL"
ENV_KEY = "MEMCLAW_API_KEY"
ENV_TENANT = "MEMCLAW_TENANT_ID"
DEFAULT_PROFILE = "memclaw-2026-05-30"


class TargetError(RuntimeError):
    """The target cannot be used; the message says what is wrong and what to do."""


class TargetParams(BaseModel):
    """The `target:` block of a params file."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["reference", "live"] = "reference"
    profile: str = DEFAULT_PROFILE
    # reference only: passed to `python -m reference_server` (e.g. "10/second")
    write_rate: str | None = None
    search_rate: str | None = None
    # reference only (scale runs): the server's storage, `sqlite` (a file) or `postgres` (a
    # fresh database on an embedded PostgreSQL + pgvector: the `pg` extra), and background
    # memories written into the run's tenant through the storage layer before the run
    # (reference_server/background.py), so the run meets a production-sized store
    storage: Literal["sqlite", "postgres"] = "sqlite"
    background_memories: int = Field(0, ge=0)
    vector_search: Literal["exact", "hnsw"] = "exact"  # postgres: exact ranking or HNSW
    # live only: `key` = X-API-Key; `headers` = self-hosted MemClaw without a gateway
    auth: Literal["key", "headers"] = "key"


@dataclass
class Target:
    """An endpoint plus the tenant credential a run uses; `info` is filled by `preflight`."""

    kind: str
    base_url: str
    tenant: Credential
    profile_requested: str | None = None
    secrets: frozenset[str] = frozenset()
    info: dict[str, Any] = field(default_factory=dict)
    server: Any = None  # the ReferenceServer when kind == "reference"
    storage: str | None = None  # reference: sqlite / postgres
    background_memories: int = 0

    def manifest_entry(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "base_url": self.base_url,
            "tenant_id": self.tenant.tenant_id,
            "server_version": self.info.get("version"),
            "server_profile": self.info.get("profile"),
            "latency_simulated": self.info.get("latency_simulated"),
            **({"storage": self.storage, "background_memories": self.background_memories}
               if self.storage else {}),
        }


@contextmanager
def open_target(params: TargetParams) -> Iterator[Target]:
    if params.kind == "reference":
        with reference_target(params) as target:
            yield target
    else:
        yield live_target(params)


@contextmanager
def reference_target(params: TargetParams) -> Iterator[Target]:
    try:
        from reference_server.process import ReferenceServer
    except ImportError as exc:
        raise TargetError(
            f"the bundled reference server is not importable ({exc}); install the kit with "
            "`pip install -e .` or use a live target"
        ) from exc
    extra: list[str] = []
    if params.write_rate:
        extra += ["--write-rate", params.write_rate]
    if params.search_rate:
        extra += ["--search-rate", params.search_rate]
    db_url = None
    if params.storage == "postgres":
        extra += ["--vector-search", params.vector_search]
        from reference_server.embedded_pg import shared_database_url

        db_url = shared_database_url()
    with ReferenceServer(profile=params.profile, extra_args=tuple(extra),
                         db_url=db_url) as server:
        target = target_for_server(server, params.profile)
        target.storage = (f"postgres ({params.vector_search})" if server.db_url
                          else "sqlite")
        if params.background_memories:
            from reference_server.background import seed_background

            seed_background(server.db_url or server.db_path, target.tenant.tenant_id,
                            params.background_memories)
            target.background_memories = params.background_memories
        yield target


def target_for_server(server: Any, profile: str | None = None) -> Target:
    """A `reference` target on an already running ReferenceServer, with a fresh tenant."""
    tenant_id, raw_key = server.create_tenant()
    return Target(
        kind="reference",
        base_url=server.base_url,
        tenant=Credential(kind="tenant", tenant_id=tenant_id, key=raw_key),
        profile_requested=profile,
        secrets=frozenset(s for s in (raw_key, server.admin_key) if s),
        server=server,
    )


def live_target(params: TargetParams, env: dict[str, str] | None = None) -> Target:
    env = dict(os.environ if env is None else env)
    needed = [ENV_URL, ENV_TENANT] + ([ENV_KEY] if params.auth == "key" else [])
    missing = [name for name in needed if not env.get(name)]
    if missing:
        raise TargetError(
            f"live target needs the environment variable(s) {', '.join(missing)} "
            f"(base URL, tenant id{', API key' if params.auth == 'key' else ''}); "
            "export them in your shell, never put them in a params file"
        )
    tenant_id = env[ENV_TENANT]
    if params.auth == "key":
        cred = Credential(kind="tenant", tenant_id=tenant_id, key=env[ENV_KEY])
    else:
        cred = Credential(kind="headers", tenant_id=tenant_id)
    return Target(
        kind="live",
        base_url=env[ENV_URL].rstrip("/"),
        tenant=cred,
        secrets=frozenset({cred.key} if cred.key else ()),
    )


async def preflight(client: MemClawClient, target: Target) -> None:
    """Reach the endpoint, read its version, and prove the credential works.

    Raises TargetError naming the problem: unreachable, wrong key, unexpected shape.
    """
    version = await client.version()
    if version.status is None:
        raise TargetError(
            f"cannot reach {target.base_url} ({version.error}); is the server running and "
            f"is the URL right{' (' + ENV_URL + ')' if target.kind == 'live' else ''}?"
        )
    if version.ok and not isinstance(version.body, dict):
        raise TargetError(
            f"GET /api/v1/version at {target.base_url} answered an unexpected shape "
            f"({version.error or type(version.body).__name__}); is this a MemClaw endpoint?"
        )
    target.info = dict(version.body) if version.ok else {}
    served = target.info.get("profile")
    if target.profile_requested and served != target.profile_requested:
        raise TargetError(
            f"{target.base_url} serves profile {served!r}, not the requested "
            f"{target.profile_requested!r}"
        )
    probe = await client.list_memories(target.tenant, limit=1)
    if probe.status in (401, 403):
        hint = f"check {ENV_KEY} and {ENV_TENANT}" if target.kind == "live" else "tenant key"
        raise TargetError(
            f"{target.base_url} rejected the credential for tenant "
            f"{target.tenant.tenant_id!r} ({probe.error}); {hint}"
        )
    if probe.status is None:
        raise TargetError(f"{target.base_url} stopped answering ({probe.error})")
    if probe.ok and not (isinstance(probe.body, dict) and "items" in probe.body):
        raise TargetError(
            f"GET /api/v1/memories at {target.base_url} answered an unexpected shape; "
            "is this a MemClaw-compatible endpoint?"
        )
