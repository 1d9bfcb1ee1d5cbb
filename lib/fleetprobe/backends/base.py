"""What every backend adapter implements: write, GET by id, search, in the wire's terms.

The adapter app (`app.py`) resolves the caller's key to an `Identity` and hands the backend
the request's own scoping fields; the backend translates them into its documented scoping
API (namespace, user/agent/run ids and filters, scope path) and adds no check of its own.
A request the backend has no equivalent for raises `NotSupported`: the app answers 501
`NOT_SUPPORTED_BY_BACKEND` and the harness records the probe as not applicable.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol


class NotSupported(Exception):
    """This backend has no equivalent of the request; the message says why."""


class Denied(PermissionError):
    """The backend's own access control denied the caller (Cognee's dataset permissions): a
    403 in MemClaw's envelope with the backend's reason, nothing written."""


def segment(value: str, reserved: str) -> str:
    """`value` as one segment of a backend's path or namespace: each character the backend
    reads as structure (`reserved`, e.g. `.` for LangGraph, `/` for CrewAI) and the escape
    `~` itself become `~XX`, so a fleet id never splits or nests and distinct ids stay
    distinct. Everything else passes as sent, so the backend's own matching (LIKE wildcards
    `%` and `_` included) is what is measured."""
    out = []
    for ch in value:
        out.append(f"~{ord(ch):02X}" if ch in reserved or ch == "~" else ch)
    return "".join(out)


@dataclass(frozen=True)
class Identity:
    """Who a request speaks as, from its key: a tenant key (no agent) or an agent key (agent,
    its home fleet and the trust it was provisioned with, which no backend here checks)."""

    tenant_id: str
    agent_id: str | None = None
    fleet_id: str | None = None
    trust: int | None = None


# Who sent the current write (set by the app before `Backend.write`; the worker thread that
# runs it sees the request's context): a backend whose own access control checks the
# credential's principal (Cognee) acts as that caller, not as the body's `agent_id`.
CALLER: ContextVar[Identity | None] = ContextVar("fleetprobe_backend_caller", default=None)


@dataclass
class StoredMemory:
    """A memory in wire terms, as written and as read back from the backend."""

    tenant_id: str
    content: str
    agent_id: str | None = None
    fleet_id: str | None = None
    visibility: str = "scope_team"
    metadata: dict[str, Any] = field(default_factory=dict)
    memory_type: str = "fact"
    source_uri: str | None = None
    run_id: str | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    similarity: float | None = None

    def row(self) -> dict[str, Any]:
        """The reference server's row shape, so its serializers build the wire answer."""
        return {
            "id": self.id, "tenant_id": self.tenant_id, "fleet_id": self.fleet_id,
            "agent_id": self.agent_id, "memory_type": self.memory_type, "title": None,
            "content": self.content, "weight": None, "source_uri": self.source_uri,
            "run_id": self.run_id, "metadata": self.metadata or None,
            "created_at": self.created_at, "expires_at": None, "subject_entity_id": None,
            "predicate": None, "object_value": None, "ts_valid_start": None,
            "ts_valid_end": None, "status": "active", "visibility": self.visibility,
            "recall_count": 0, "last_recalled_at": None, "supersedes_id": None,
            "content_hash": None, "deleted_at": None, "embedding": None,
        }

    def payload(self) -> dict[str, Any]:
        """Every field as plain JSON values (what backends keep beside the text)."""
        return {"id": self.id, "tenant_id": self.tenant_id, "agent_id": self.agent_id,
                "fleet_id": self.fleet_id, "visibility": self.visibility,
                "metadata": self.metadata, "memory_type": self.memory_type,
                "source_uri": self.source_uri, "run_id": self.run_id,
                "created_at": self.created_at, "content": self.content}

    @classmethod
    def from_payload(cls, payload: dict[str, Any], similarity: float | None = None
                     ) -> StoredMemory:
        keys = ("id", "tenant_id", "agent_id", "fleet_id", "visibility", "metadata",
                "memory_type", "source_uri", "run_id", "created_at", "content")
        values = {k: payload[k] for k in keys if k in payload and payload[k] is not None}
        return cls(**values, similarity=similarity)


@dataclass(frozen=True)
class SearchScope:
    """The scope a search names: the request's `fleet_ids` when it sends them, else the
    caller's home fleet (agent key), else none (tenant-wide); `author` = `filter_agent_id`."""

    fleet_ids: tuple[str, ...] | None
    author: str | None


@dataclass(frozen=True)
class Change:
    """What a `PATCH /memories/{id}` asks for that a backend can express: new content, a new
    weight (CrewAI's `importance`; kept beside the text elsewhere), new caller metadata."""

    content: str | None = None
    weight: float | None = None
    metadata: dict[str, Any] | None = None


DEPLOYMENTS = ("idiomatic", "strict")


def deployment_of(value: str | None, extra: tuple[str, ...] = ()) -> str:
    """`idiomatic` (the layout the backend's own docs and framework use) unless `strict` (the
    strictest scoping its native API can express); docs/backends.md shows each mapping.
    `extra`: a backend's own further deployments (e.g. mem0's `infer`: its model-mediated
    path, against the scripted model; docs/scripted-model.md)."""
    name = value or "idiomatic"
    if name not in DEPLOYMENTS + extra:
        raise ValueError(f"deployment {name!r}: use {' or '.join(DEPLOYMENTS + extra)}")
    return name


# deployments that run a backend's model-mediated paths against the scripted model
MODEL_DEPLOYMENTS = ("infer", "analysis", "strict-analysis")
# backends whose every deployment needs the scripted model: their ingestion is a model's
# (Graphiti's entity and fact extraction; Cognee's cognify extracts a graph and summarizes)
MODEL_BACKENDS = ("graphiti", "cognee")


class Backend(Protocol):
    name: str  # langgraph / mem0 / crewai
    package: str  # the distribution whose version is measured
    store: str  # which store of the backend (e.g. InMemoryStore)
    deployment: str  # idiomatic / strict
    concurrent: bool  # safe for calls from several threads at once (its store serializes)

    def write(self, memory: StoredMemory) -> StoredMemory: ...

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None: ...

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]: ...

    def update(self, caller: Identity, memory_id: str, change: Change
               ) -> StoredMemory | None: ...

    def delete(self, caller: Identity, memory_id: str) -> bool: ...

    def list(self, caller: Identity, scope: SearchScope, limit: int) -> list[StoredMemory]: ...

    def close(self) -> None: ...
