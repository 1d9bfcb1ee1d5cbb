"""The `propagation` checkers: pure functions over recorded responses and events (the same
functions `fleetprobe judge` calls)."""

from __future__ import annotations

from typing import Any

from fleetprobe.client import Result


def observed_visibility(result: Result, canary: str) -> bool | None:
    """Visible when a 2xx body carries the canary; a 4xx answer is an observed "not shown";
    a transport error, a 5xx or an unusable body leaves it unknown (None)."""
    if result.ok:
        return canary_seen(result.body, canary)
    if result.status is not None and 400 <= result.status < 500:
        return False
    return None


def canary_seen(search_body_returned: Any, canary: str) -> bool | None:
    """Whether a search response carries the canary (None: no usable body)."""
    if not isinstance(search_body_returned, dict):
        return None
    items = search_body_returned.get("items")
    if not isinstance(items, list):
        return None
    return any(
        isinstance(item, dict) and isinstance(item.get("metadata"), dict)
        and item["metadata"].get("canary") == canary
        for item in items
    )


def judge_probe(relation: str, visible: bool | None) -> dict[str, Any]:
    """A foreign reader that sees the canary is a cross-fleet leak; a sibling never leaks."""
    leak = None if visible is None else (relation == "foreign" and visible)
    return {"visible": visible, "leak": leak}


def moved_count(redistribute_body: Any) -> int | None:
    if isinstance(redistribute_body, dict) and isinstance(redistribute_body.get("moved"), int):
        return redistribute_body["moved"]
    return None


def judge_flip(agent_id_after: str | None, target_agent: str) -> bool | None:
    """Did the GET after redistribute show the row re-homed onto the target?"""
    return None if agent_id_after is None else agent_id_after == target_agent
