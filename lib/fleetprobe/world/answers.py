"""How the harness reads a target's answer where the world and its probes meet the wire:
a target with no route for a request (not applicable, in its own words) and an answer that
shows only that something exists."""

from __future__ import annotations

from typing import Any

NA_STATUSES = (404, 405, 501)
NA_MESSAGES = ("Not Found", "Method Not Allowed", "Not Implemented")
# an existence-only reveal (the key or attempt id exists; no row id shown)
EXISTS = "exists"


def endpoint_absent(event: dict[str, Any]) -> str | None:
    """The target's words when it has no route for the probe (None when it answered), or
    a backend adapter's "not supported by this backend" reason."""
    if event.get("not_applicable"):
        return str(event["not_applicable"])
    if event.get("status") not in NA_STATUSES:
        return None
    message = (event.get("error") or "").split(" ", 1)[-1]
    return event["error"] if message in NA_MESSAGES else None
