"""The FastAPI application: wiring of state, middleware, error envelope and routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..governance.auth import KeyRegistry
from ..governance.profiles import LatencyModel, Profile
from ..governance.ratelimit import RateLimiter, parse_rate
from ..pipeline import search as search_pipeline
from ..pipeline import write as write_pipeline
from ..pipeline.contradiction import ContradictionDetector
from ..pipeline.embedding import make_embedder
from ..pipeline.latency import LatencySimulator
from ..storage import open_storage
from ..wire.errors import envelope, install_error_handlers
from ..wire.schemas import loose_scalars
from .routes_admin import router as admin_router
from .routes_insights import router as insights_router
from .routes_memories import router as memories_router
from .routes_reads import router as reads_router
from .state import ServerState, state_of

MAX_BODY_BYTES = 1024 * 1024
# a request body with no bytes for this long is answered 408 and its connection closed
BODY_STALL_S = 10.0


@dataclass(frozen=True)
class ServerConfig:
    profile: Profile
    db_path: Path | str  # a SQLite file, or a postgresql:// URL
    admin_key: str
    latency_model: bool = False
    embedding_dim: int = 384
    auth_mode: str = "gateway"  # gateway | gate | headers (governance/auth.py)
    embedder: str = "hashing"  # hashing | minilm (pipeline/embedding.py)
    gate_key: str | None = None
    vector_search: str = "exact"  # PostgreSQL only: exact or hnsw


class _BodyStalled(Exception):
    pass


class BodySizeLimit:
    """413 with the envelope for bodies over 1 MiB, declared or streamed (pure ASGI, so
    nothing downstream ever sees a partial body); 408 and the connection closed when the
    body stalls (no bytes for `stall_s` seconds), so a client cannot hold a socket and a
    task for as long as it likes."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES,
                 stall_s: float = BODY_STALL_S) -> None:
        self.app, self.limit, self.stall_s = app, limit, stall_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def timed() -> Message:
            try:
                return await asyncio.wait_for(receive(), self.stall_s)
            except TimeoutError:
                raise _BodyStalled from None

        try:
            await self._limited(scope, timed, receive, send)
        except _BodyStalled:
            message = f"Request body stalled (no data for {self.stall_s:g} s)."
            await self._answer(send, 408, message, close=True)

    async def _limited(self, scope: Scope, timed: Receive, receive: Receive,
                       send: Send) -> None:
        """Reads the whole body through `timed`; the app later reads only `receive`."""
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._drain(timed)
            await self._reject(send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await timed()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit:
                if more:
                    await self._drain(timed)
                await self._reject(send)
                return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _drain(receive: Receive, cap: int = 64 * 1024 * 1024) -> None:
        """Read and drop the rest of an oversized body (up to a cap), so the client gets
        its 413 instead of a connection reset while it is still sending."""
        seen, more = 0, True
        while more and seen < cap:
            message = await receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            more = message.get("more_body", False)

    async def _reject(self, send: Send) -> None:
        await self._answer(send, 413, f"Request body too large (maximum {self.limit} bytes).")

    @staticmethod
    async def _answer(send: Send, status: int, message: str, close: bool = False) -> None:
        payload = json.dumps(envelope(status, message, message)).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(payload)).encode())]
        if close:  # the rest of the body may still come: end the connection
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def build_state(config: ServerConfig) -> ServerState:
    profile = config.profile
    write_pipeline.validate_steps(profile.write_steps)
    search_pipeline.validate_steps(profile.search_steps)
    storage = open_storage(config.db_path, config.embedding_dim, config.vector_search)
    rates = {"write": parse_rate(profile.write_rate), "search": parse_rate(profile.search_rate),
             "bulk": parse_rate(profile.bulk_rate)}
    latency = None
    if config.latency_model:
        profile = profile.with_overrides(latency=profile.latency or LatencyModel())
        latency = LatencySimulator(profile.latency)
    keys = KeyRegistry(storage, config.admin_key, config.auth_mode,  # type: ignore[arg-type]
                       config.gate_key)
    return ServerState(profile=profile, storage=storage,
                       embedder=make_embedder(config.embedder, config.embedding_dim), keys=keys,
                       limiter=RateLimiter(rates), detector=ContradictionDetector(storage),
                       latency=latency)


async def refuse_loose_scalars(request: Request) -> None:
    """`Profile.strict_numbers`: a body whose numbers or booleans pass only by MemClaw's
    coercion (`"top_k": true`, `"5"`) is a 422, before the handler runs."""
    state = await state_of(request)
    if not state.profile.strict_numbers or request.method not in ("POST", "PATCH", "PUT"):
        return
    field = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(field, "field_info", None), "annotation", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return
    errors = loose_scalars(model, await request.body())
    if errors:
        raise RequestValidationError(errors)


def create_app(state: ServerState, body_stall_s: float = BODY_STALL_S) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.detector.start()  # also drains jobs left pending by a previous process
        yield
        await state.detector.stop()
        state.storage.close()

    app = FastAPI(title="fleetprobe reference server (MemClaw wire-compatible)",
                  version=__version__, docs_url="/api/docs", openapi_url="/api/openapi.json",
                  lifespan=lifespan, dependencies=[Depends(refuse_loose_scalars)])
    app.state.server = state
    install_error_handlers(app)
    app.include_router(memories_router)
    app.include_router(reads_router)
    app.include_router(admin_router)
    app.include_router(insights_router)
    app.add_middleware(BodySizeLimit, stall_s=body_stall_s)
    return app
