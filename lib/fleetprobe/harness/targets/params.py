"""The `target:` block of a params file (`TargetParams`), checked before any server starts,
and the environment variables a live target is read from."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ENV_URL = "MEMCLAW_API_URL"
ENV_KEY = "MEMCLAW_API_KEY"
ENV_TENANT = "MEMCLAW_TENANT_ID"
DEFAULT_PROFILE = "memclaw-2026-05-30"
# Set by `fleetprobe reproduce --fast`: servers already running, keyed by the target params
# they serve, that runs share (each in a fresh tenant) instead of starting their own.
ENV_SHARED_SERVERS = "FLEETPROBE_SHARED_SERVERS"
LiveAuth = Literal["key", "gate", "headers"]
AUTH_TEXT: dict[str, str] = {
    "key": "managed gateway: tenant key in X-API-Key, agent keys self-provisioned",
    "gate": "self-hosted engine: shared gate key in X-API-Key + X-Tenant-ID + asserted "
            "X-Agent-ID",
    "headers": "self-hosted engine without a gate key: X-Tenant-ID + asserted X-Agent-ID",
}
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:@/+-]{0,79}$")


class TargetError(RuntimeError):
    """The target cannot be used; the message says what is wrong and what to do."""


class TargetParams(BaseModel):
    """The `target:` block of a params file."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["reference", "live", "backend", "engine"] = "reference"
    # reference only (the bundled server's profile); None = DEFAULT_PROFILE for `reference`;
    # a batch plan names backends as profiles (`backend-mem0`)
    profile: str | None = None
    # backend only: which memory system, and which of its stores (langgraph: memory | sqlite)
    backend: Literal["langgraph", "mem0", "crewai", "graphiti", "cognee"] | None = None
    backend_store: str | None = None
    # backend only: its locked environment (lib/fleetprobe/backends/locks/<env>.in; default the
    # backend's own) and how wire scopes map onto its own (idiomatic | strict; docs/backends.md)
    backend_env: str | None = None
    backend_deployment: str | None = None
    # engine only: the engine's source (a checkout or .tar.gz); None = FLEETPROBE_ENGINE_SRC
    engine_src: str | None = None
    # reference and engine: the server's rate limits (e.g. "10/second"); for the engine
    # RATE_LIMIT_WRITE / _SEARCH / _WRITE_BULK, raised by default (fleetprobe.engine.services)
    write_rate: str | None = None
    search_rate: str | None = None
    bulk_rate: str | None = None
    # reference only: the server's embedder (`hashing` default; `minilm` needs the embed extra)
    embedder: Literal["hashing", "minilm"] | None = None
    # the credential shape (the package docstring); for `reference` the bundled server is started
    # demanding that shape (`key` = its gateway keys)
    auth: LiveAuth = "key"
    # reference only (scale runs): the server's storage, `sqlite` (a file) or `postgres` (a
    # fresh database on an embedded PostgreSQL + pgvector: the `pg` extra), and background
    # memories written into the run's tenant through the storage layer before the run
    # (reference_server/pipeline/background.py), so the run meets a production-sized store
    storage: Literal["sqlite", "postgres"] = "sqlite"
    background_memories: int = Field(0, ge=0)
    vector_search: Literal["exact", "hnsw"] = "exact"  # postgres: exact ranking or HNSW
    # the name the report judges this run under; None = default_label()
    label: str | None = None

    @model_validator(mode="after")
    def _profile_for_reference_only(self) -> TargetParams:
        if self.kind in ("live", "engine") and self.embedder is not None:
            raise ValueError("embedder selects the bundled server's embedder; a live "
                             "endpoint embeds as it is configured")
        if self.kind == "engine":
            if "auth" not in self.model_fields_set:
                self.auth = "headers"  # the engine has no gateway keys: headers by default
            if self.auth == "key":
                raise ValueError("the engine has no gateway keys: target.auth headers or gate")
        if self.kind in ("live", "engine"):
            # a profile selects the bundled server's behaviour: a params file written for it
            # can be pointed at a live endpoint (`--set target.kind=live`) without it reaching
            # the manifest; a live target's name in the report is target.label
            self.profile = None
        if self.kind == "reference" and self.profile is None:
            self.profile = DEFAULT_PROFILE
        if self.kind == "reference":
            _check_known_profile(self.profile)
        if self.label is not None and not LABEL_PATTERN.match(self.label):
            raise ValueError("label: 1-80 characters, letters, digits and ' ._:@/+-'")
        return self


def _check_known_profile(profile: str) -> None:
    """A profile the bundled server does not have fails here, in one line, before any server
    starts."""
    try:
        from reference_server.governance.profiles import PROFILES
    except ImportError:
        return
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; the bundled server has "
                         f"{', '.join(sorted(PROFILES))}")
