"""What one call returns (`Result`) and how an answer is read without raising: a field of
a JSON body, a backend adapter's "not supported", MemClaw's error envelope in short, and
which answers are worth a retry (`RetryPolicy`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ERROR_MAX_CHARS = 160
# `error.code` of a 501 from a backend adapter (lib/fleetprobe/backends): the memory system
# behind it has no equivalent of the path, so the probe is not applicable, never pass or fail.
NOT_SUPPORTED_CODE = "NOT_SUPPORTED_BY_BACKEND"


@dataclass(frozen=True)
class Result:
    """The outcome of one logical call (after retries)."""

    op: str
    status: int | None
    body: Any | None
    latency_ms: float | None
    attempts: int
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status == 429 or self.status >= 500


def body_field(body: Any, name: str) -> Any:
    """A field of a JSON object body, or None for any other body (error text, list, None)."""
    return body.get(name) if isinstance(body, dict) else None


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    backoff_base_s: float = 0.2
    backoff_max_s: float = 5.0
    retry_on_429: bool = True

    def should_retry(self, result: Result) -> bool:
        if not_supported(result) is not None:
            return False  # a backend without the path answers the same every time
        if result.status == 429:
            return self.retry_on_429
        return result.retryable


def not_supported(result: Result) -> str | None:
    """The reason, when the answer is a backend adapter's "not supported by this backend"
    (501 with `error.code` NOT_SUPPORTED_BY_BACKEND); None for every other answer."""
    if result.status != 501 or not isinstance(result.body, dict):
        return None
    envelope = result.body.get("error")
    if not isinstance(envelope, dict) or envelope.get("code") != NOT_SUPPORTED_CODE:
        return None
    return str(envelope.get("message") or "not supported by this backend")[:ERROR_MAX_CHARS]


def short_error(status: int, body: Any) -> str:
    """`409 Duplicate memory exists: <id>` from MemClaw's error envelope, or the raw detail."""
    message: Any = None
    if isinstance(body, dict):
        envelope = body.get("error")
        if isinstance(envelope, dict):
            message = envelope.get("message")
        if message is None:
            message = body.get("detail")
    if message is None:
        message = "no error message"
    return f"{status} {message}"[:ERROR_MAX_CHARS]
