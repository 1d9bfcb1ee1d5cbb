"""Stored rows to MemClaw's response shapes: `MemoryOut` (write, list, search; `Z`
timestamps) and the by-id detail (`+00:00` timestamps, `content_hash`, `deleted_at`)."""

from __future__ import annotations

from typing import Any

import numpy as np

_TIMESTAMPS = ("created_at", "expires_at", "ts_valid_start", "ts_valid_end",
               "last_recalled_at", "deleted_at")


def _z(ts: str | None) -> str | None:
    return ts[:-6] + "Z" if ts and ts.endswith("+00:00") else ts


def memory_out(row: dict, links: list[dict] | None = None, similarity: float | None = None,
               usage: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row["id"], "tenant_id": row["tenant_id"], "fleet_id": row["fleet_id"],
        "agent_id": row["agent_id"], "agent_display_name": row.get("agent_display_name"),
        "memory_type": row["memory_type"], "title": row["title"], "content": row["content"],
        "weight": row["weight"], "source_uri": row["source_uri"], "run_id": row["run_id"],
        "metadata": row["metadata"], "created_at": _z(row["created_at"]),
        "expires_at": _z(row["expires_at"]), "entity_links": links or [],
        "similarity": similarity, "subject_entity_id": row["subject_entity_id"],
        "predicate": row["predicate"], "object_value": row["object_value"],
        "ts_valid_start": _z(row["ts_valid_start"]), "ts_valid_end": _z(row["ts_valid_end"]),
        "status": row["status"], "visibility": row["visibility"],
        "recall_count": row["recall_count"], "last_recalled_at": _z(row["last_recalled_at"]),
        "supersedes_id": row["supersedes_id"], "superseded_by": None, "confidence": None,
        "is_inferred": False, "scope": None,
    }
    if usage:
        out["usage"] = {"memories_stored": None, "memories_limit": None,
                        "writes_remaining": None}
    return out


def memory_detail(row: dict, links: list[dict]) -> dict[str, Any]:
    keys = ("id", "tenant_id", "fleet_id", "agent_id", "memory_type", "title", "content",
            "weight", "source_uri", "run_id", "metadata", "content_hash", "subject_entity_id",
            "predicate", "object_value", "status", "visibility", "recall_count",
            "supersedes_id", *_TIMESTAMPS)
    detail = {k: row[k] for k in keys}
    detail["agent_display_name"] = row.get("agent_display_name")
    detail["entity_links"] = links
    detail.update(_embedding_summary(row.get("embedding")))
    return detail


def _embedding_summary(blob: bytes | None) -> dict[str, Any]:
    if not blob:
        return {"embedding_preview": None, "embedding_stats": None}
    vec = np.frombuffer(blob, dtype=np.float32)
    return {
        "embedding_preview": [round(float(x), 6) for x in vec[:20]],
        "embedding_stats": {"dimensions": int(vec.size), "min": float(vec.min()),
                            "max": float(vec.max()), "mean": float(vec.mean()),
                            "non_zero": int(np.count_nonzero(vec))},
    }


def content_preview(content: str, limit: int = 200) -> str:
    return content if len(content) <= limit else content[: limit - 3] + "..."
