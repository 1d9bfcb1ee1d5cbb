"""Other memory systems behind a thin adapter that speaks MemClaw's wire (docs/backends.md).

`python -m fleetprobe.backends --backend langgraph|mem0|crewai` runs one adapter on loopback;
the harness starts and stops it for `target.kind: backend` (`process.BackendServer`), from the
backend's own locked environment (`envs`). Each adapter runs its backend in process, offline
(`netguard`), with the kit's deterministic embedder and no LLM, and translates every call
into the backend's own scoping API under a named deployment (idiomatic or strict).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

BACKENDS = ("langgraph", "mem0", "crewai")
BACKENDS += ("graphiti",)  # issue 37 part 4: group_id partitions on Kuzu
BACKENDS += ("cognee",)  # issue 37: users, tenants and dataset permissions


def make_backend(name: str, data_dir: Path, store: str | None = None,
                 deployment: str | None = None) -> Any:
    """Import lazily: each backend's libraries live only in its own locked environment
    (`envs`), which the adapter process runs from."""
    if name == "langgraph":
        from .langgraph_store import LangGraphBackend

        return LangGraphBackend(data_dir, store, deployment)
    if name == "mem0":
        from .mem0_backend import Mem0Backend

        return Mem0Backend(data_dir, store, deployment)
    if name == "crewai":
        from .crewai_memory import CrewAIBackend

        return CrewAIBackend(data_dir, store, deployment)
    if name == "graphiti":
        from .graphiti_backend import GraphitiBackend

        return GraphitiBackend(data_dir, store, deployment)
    if name == "cognee":
        from .cognee_backend import CogneeBackend

        return CogneeBackend(data_dir, store, deployment)
    raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
