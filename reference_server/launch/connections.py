"""Connection limits at the HTTP protocol (uvicorn has neither): a connection that has not
completed a request's headers within `HEADER_TIMEOUT_S` of opening, or of its previous
response, is closed; a client (peer address) holding `MAX_CONNECTIONS_PER_CLIENT` open
connections has any further one closed on arrival, so one client's idle or slow sockets
cannot take the server's. Body stalls are the app's (`api.app.BodySizeLimit`, 408)."""

from __future__ import annotations

import asyncio
import importlib.util
from collections import Counter
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
# far above what a harness or benchmark opens (16-64 connections), far below a process's fds
MAX_CONNECTIONS_PER_CLIENT = 256


def with_limits(base: type[asyncio.Protocol], timeout_s: float,
                max_per_client: int = MAX_CONNECTIONS_PER_CLIENT) -> type:
    """`base` (uvicorn's h11 or httptools protocol) with the header deadline and the
    per-client cap. The deadline check runs every `timeout_s`: a connection whose request
    cycle has not moved since the last check, and has no request in flight, is closed, so a
    slow-header client is gone within 2x."""
    open_by_client: Counter[str] = Counter()

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._seen_cycle = None
            self._deadline = self.loop.call_later(timeout_s, self._check_headers)
            peer = transport.get_extra_info("peername")
            self._client = peer[0] if isinstance(peer, tuple) else None
            if self._client is not None:
                open_by_client[self._client] += 1
                if open_by_client[self._client] > max_per_client:
                    transport.close()  # over the cap: refused before it is read

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.cancel()
            if self._client is not None:
                open_by_client[self._client] -= 1
                if open_by_client[self._client] <= 0:
                    del open_by_client[self._client]
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


def http_protocol(name: str, header_timeout_s: float,
                  max_per_client: int = MAX_CONNECTIONS_PER_CLIENT) -> type:
    """uvicorn's protocol class for `--http auto|h11|httptools`, with the limits."""
    if name == "httptools" or (name == "auto" and importlib.util.find_spec("httptools")):
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return with_limits(HttpToolsProtocol, header_timeout_s, max_per_client)
    return with_limits(H11Protocol, header_timeout_s, max_per_client)
