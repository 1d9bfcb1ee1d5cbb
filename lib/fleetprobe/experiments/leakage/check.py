"""Leakage: judging one answer from what the server returned (was the probed row in it, and
so a leak or a miss against the expected verdict); an answer that never arrived stays
unjudged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleetprobe.client import Result


def judge(expected: str, returned: bool | None) -> dict[str, bool | None]:
    """leak = returned though expected deny; miss = not returned though expected allow.
    `returned is None` (no answer to judge) leaves both unjudged."""
    if returned is None:
        return {"leak": None, "miss": None}
    return {"leak": returned and expected == "deny", "miss": (not returned) and expected == "allow"}


def _row_matches(row: Mapping[str, Any], memory_id: str | None, canary: str) -> bool:
    metadata = row.get("metadata")
    return (memory_id is not None and row.get("id") == memory_id) or (
        isinstance(metadata, Mapping) and metadata.get("canary") == canary
    )


def search_returned(body: Any, memory_id: str | None, canary: str) -> bool:
    """The probed row is among the search items (matched by id or by its canary)."""
    items = body.get("items") if isinstance(body, Mapping) else None
    if not isinstance(items, list):
        return False
    return any(isinstance(row, Mapping) and _row_matches(row, memory_id, canary) for row in items)


def get_returned(status: int | None, body: Any, memory_id: str | None, canary: str) -> bool:
    """A GET-by-id returned the probed row: 200 and the body is that row."""
    return status == 200 and isinstance(body, Mapping) and _row_matches(body, memory_id, canary)


def answered(result: Result) -> bool:
    """An answer the probe can be judged on: any status but 429/5xx (after retries)."""
    return result.status is not None and not result.retryable
