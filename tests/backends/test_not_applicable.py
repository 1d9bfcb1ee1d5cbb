"""A 501 NOT_SUPPORTED_BY_BACKEND answer is not applicable: never retried, its judgements
null (neither pass nor fail), the reason on the event and counted in the manifest."""

from __future__ import annotations

import json

from fleetprobe.client import NOT_SUPPORTED_CODE, Result, RetryPolicy, not_supported
from fleetprobe.harness.trace import Trace


def _answer(status: int, code: str) -> Result:
    body = {"detail": "x", "error": {"code": code, "message": f"not supported ({code})"}}
    return Result("GET /api/v1/memories/0b9c", status, body, 1.0, 1, f"{status} x")


def test_only_the_backend_code_is_not_applicable() -> None:
    assert not_supported(_answer(501, NOT_SUPPORTED_CODE)) is not None
    assert not_supported(_answer(501, "NOT_IMPLEMENTED")) is None
    assert not_supported(_answer(404, NOT_SUPPORTED_CODE)) is None
    assert not RetryPolicy().should_retry(_answer(501, NOT_SUPPORTED_CODE))
    assert RetryPolicy().should_retry(_answer(501, "NOT_IMPLEMENTED"))


def test_event_judgements_are_nulled_and_counted(tmp_path) -> None:
    trace = Trace(tmp_path, "leakage", 1, "n0", {})
    na = trace.event("probe", _answer(501, NOT_SUPPORTED_CODE), axis="get", expected="deny",
                     returned=False, leak=False, miss=False)
    judged = trace.event("probe", _answer(404, "NOT_FOUND"), axis="get", expected="deny",
                         returned=False, leak=False, miss=False)
    assert na["leak"] is None and na["miss"] is None and na["returned"] is None
    assert na["not_applicable"].startswith("not supported")
    assert judged["leak"] is False and judged["not_applicable"] is None
    trace.write_manifest()
    manifest = json.loads(trace.manifest_path.read_text())
    assert manifest["not_applicable"]["GET /api/v1/memories/{id}"]["count"] == 1
