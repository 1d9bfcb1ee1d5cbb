"""Header read deadline at the HTTP protocol (uvicorn has none): a connection that has not
completed a request's headers within `HEADER_TIMEOUT_S` of opening, or of its previous
response, is closed. Body stalls are the app's (`api.app.BodySizeLimit`, 408)."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


def with_header_deadline(base: type[asyncio.Protocol], timeout_s: float) -> type:
    """`base` (uvicorn's h11 or httptools protocol) with the header deadline. The check runs
    every `timeout_s`: a connection whose request cycle has not moved since the last check,
    and has no request in flight, is closed, so a slow-header client is gone within 2x."""

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._seen_cycle = None
            self._deadline = self.loop.call_later(timeout_s, self._check_headers)

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.cancel()
            super().connection_lost(exc)

        def _check_headers(self) -> None:
            cycle = self.cycle
            idle = cycle is None or cycle.response_complete
            if cycle is self._seen_cycle and idle and not self.transport.is_closing():
                self.transport.close()  # no complete request headers within the deadline
                return
            self._seen_cycle = cycle
            self._deadline = self.loop.call_later(timeout_s, self._check_headers)

    HeaderDeadline.__name__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


def http_protocol(name: str, header_timeout_s: float) -> type:
    """uvicorn's protocol class for `--http auto|h11|httptools`, with the header deadline."""
    if name == "httptools" or (name == "auto" and importlib.util.find_spec("httptools")):
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return with_header_deadline(HttpToolsProtocol, header_timeout_s)
    return with_header_deadline(H11Protocol, header_timeout_s)
