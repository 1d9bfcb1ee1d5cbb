"""Async MemClaw REST client (httpx + tenacity): who a request speaks as (`credentials`),
what a call returns and how it is read (`results`), the client itself (`memclaw`).

Every call returns a `Result`; nothing here raises on an HTTP status. Retries (exponential
backoff) happen only on transport errors, 5xx and 429, because any other 4xx is the
governance signal the experiments measure and must reach them unmodified.

Keys never leave a `Credential` except as a request header: its repr hides the key, errors
are built from status and server message only, and every key this client has seen is listed
by `known_secrets()` so the trace writer can refuse to persist any string that contains one.
"""

from fleetprobe.client.credentials import ASSERTED_IDENTITY_KINDS, Credential, CredentialKind
from fleetprobe.client.memclaw import API, INTERRUPTED, MemClawClient
from fleetprobe.client.results import (
    ERROR_MAX_CHARS,
    NOT_SUPPORTED_CODE,
    Result,
    RetryPolicy,
    body_field,
    not_supported,
    short_error,
)

__all__ = ["API", "ASSERTED_IDENTITY_KINDS", "ERROR_MAX_CHARS", "INTERRUPTED",
           "NOT_SUPPORTED_CODE", "Credential", "CredentialKind", "MemClawClient", "Result",
           "RetryPolicy", "body_field", "not_supported", "short_error"]
