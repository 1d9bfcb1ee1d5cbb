"""MemClaw's error envelope: `{"detail": ..., "error": {"code", "message"[, "details"]}}`."""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    402: "PAYMENT_REQUIRED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    408: "REQUEST_TIMEOUT",
    409: "CONFLICT",
    410: "GONE",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    422: "INVALID_ARGUMENTS",
    429: "RATE_LIMITED",
    500: "INTERNAL_ERROR",
    501: "NOT_IMPLEMENTED",
    502: "UPSTREAM_ERROR",
    503: "UNAVAILABLE",
    504: "UPSTREAM_TIMEOUT",
}


class EnvelopeResponse(JSONResponse):
    """Errors may echo client input; escape to ASCII so odd unicode (even lone surrogates)
    can always be rendered."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


class ApiError(Exception):
    """A route-raised error: its message becomes both `detail` and `error.message`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None
                 ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def envelope(status: int, detail: Any, message: str, details: dict | None = None) -> dict:
    error: dict[str, Any] = {"code": STATUS_CODES.get(status, f"HTTP_{status}"),
                             "message": message}
    if details:
        error["details"] = details
    return {"detail": detail, "error": error}


def error_response(status: int, message: str, headers: dict[str, str] | None = None
                   ) -> JSONResponse:
    return EnvelopeResponse(envelope(status, message, message), status_code=status,
                            headers=headers)


ECHO_MAX_DEPTH = 8


def _json_safe(value: Any, depth: int = 0) -> Any:
    """Validation errors echo the input, which may hold bytes, objects json cannot encode,
    non-finite numbers (no JSON for NaN) or hostile nesting: render what strict JSON can
    carry, and elide below a few levels."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth >= ECHO_MAX_DEPTH:
        return "..."
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, depth + 1) for v in value]
    return str(value)


def _validation_response(exc: RequestValidationError) -> JSONResponse:
    errors = [_json_safe(dict(e)) for e in exc.errors()]
    message = "; ".join(str(e.get("msg", "")) for e in errors) or "Invalid request"
    body = envelope(422, errors, message, {"errors": errors})
    return EnvelopeResponse(body, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _validation_response(exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug, never expected on any input: keep MemClaw's 500 shape, no stack in the body.
        body = envelope(500, "Internal Server Error", "Internal Server Error",
                        {"path": request.url.path, "error_type": type(exc).__name__})
        body["path"] = request.url.path
        return EnvelopeResponse(body, status_code=500)
