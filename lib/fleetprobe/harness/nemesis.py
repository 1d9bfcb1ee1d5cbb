"""The nemesis: faults injected while a run is in progress, each recorded as an event.

Two kinds, both bounded and loopback only:

- `FaultTransport` wraps the harness's httpx transport (in process, no proxy) and, per HTTP
  attempt, may add latency, answer 5xx or 429 itself, or reset the connection, either
  *before* the request reaches the server (the server never saw it) or *after* the server
  answered (the server did the work, the harness lost the answer: the case idempotency
  keys exist for). Decisions are a pure function of (seed, request id, attempt), so the
  same plan draws the same faults whatever the interleaving, and at most
  `max_faults_per_request` attempts of one request are faulted, so the client's retries
  always have a clean attempt left.
- `ServerNemesis` kills the bundled server with SIGKILL at planned offsets and restarts it
  on the same database, port and keys.

Every attempt the transport sees is reported (with its fault, if any) so the checkers can
account for each 5xx and reset the harness observed (`fleetprobe.oracle.checkers`).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

REQUEST_HEADER = "X-Fleetprobe-Request-Id"  # set by the harness, stripped before sending

FaultKind = Literal["error_5xx", "error_429", "reset", "latency", "kill", "restart"]
Stage = Literal["before", "after"]


class FaultRates(BaseModel):
    """Per-attempt fault probabilities (the `faults:` block of a params file)."""

    model_config = ConfigDict(extra="forbid")

    error_5xx_before: float = Field(0.05, ge=0, le=1)
    error_5xx_after: float = Field(0.05, ge=0, le=1)
    error_429: float = Field(0.04, ge=0, le=1)
    reset_before: float = Field(0.03, ge=0, le=1)
    reset_after: float = Field(0.05, ge=0, le=1)
    latency: float = Field(0.10, ge=0, le=1)
    latency_ms: float = Field(150.0, ge=0, le=5000)
    max_faults_per_request: int = Field(2, ge=0, le=5)


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    stage: Stage | None
    status: int | None = None
    delay_ms: float | None = None


class FaultSchedule:
    """Which fault (if any) hits attempt `attempt` of request `request_id`."""

    def __init__(self, seed: int, rates: FaultRates) -> None:
        self.seed, self.rates = seed, rates
        total = (rates.error_5xx_before + rates.error_5xx_after + rates.error_429
                 + rates.reset_before + rates.reset_after + rates.latency)
        if total > 1:
            raise ValueError(f"fault probabilities sum to {total:.2f} > 1")

    def decide(self, request_id: str, attempt: int) -> Fault | None:
        if attempt > self.rates.max_faults_per_request:
            return None
        digest = hashlib.sha256(f"{self.seed}:{request_id}:{attempt}".encode()).digest()
        draw = random.Random(int.from_bytes(digest[:8], "big")).random()
        r = self.rates
        table: Sequence[tuple[float, Fault]] = (
            (r.error_5xx_before, Fault("error_5xx", "before", 503)),
            (r.error_5xx_after, Fault("error_5xx", "after", 502)),
            (r.error_429, Fault("error_429", "before", 429)),
            (r.reset_before, Fault("reset", "before")),
            (r.reset_after, Fault("reset", "after")),
            (r.latency, Fault("latency", "before", None, r.latency_ms)),
        )
        edge = 0.0
        for probability, fault in table:
            edge += probability
            if draw < edge:
                return fault
        return None


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt as the transport saw it (what `on_attempt` receives)."""

    request_id: str | None
    attempt: int
    op: str
    status: int | None
    error: str | None
    latency_ms: float
    sent_at: float  # time.time()
    answered_at: float
    fault_id: str | None


OnFault = Callable[[str, Fault, str | None, int | None], None]
OnAttempt = Callable[[Attempt], None]

_MESSAGES = {429: "Rate limit exceeded: injected by the fleetprobe nemesis.",
             502: "Upstream error: injected by the fleetprobe nemesis.",
             503: "Service unavailable: injected by the fleetprobe nemesis."}


def _envelope(status: int) -> dict[str, Any]:
    code = {429: "RATE_LIMITED", 502: "UPSTREAM_ERROR", 503: "UNAVAILABLE"}[status]
    return {"detail": _MESSAGES[status], "error": {"code": code, "message": _MESSAGES[status]}}


class FaultTransport(httpx.AsyncBaseTransport):
    """An httpx transport that injects `schedule`'s faults around `inner`."""

    def __init__(self, inner: httpx.AsyncBaseTransport, schedule: FaultSchedule | None,
                 on_fault: OnFault, on_attempt: OnAttempt, max_faults: int = 10_000) -> None:
        self.inner, self.schedule = inner, schedule
        self.on_fault, self.on_attempt = on_fault, on_attempt
        self.max_faults = max_faults
        self.injected = 0
        self._attempts: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request_id = request.headers.get(REQUEST_HEADER)
        if request_id is not None:
            del request.headers[REQUEST_HEADER]
            self._attempts[request_id] += 1
        attempt = self._attempts[request_id] if request_id else 1
        fault = None
        if self.schedule and request_id and self.injected < self.max_faults:
            fault = self.schedule.decide(request_id, attempt)
        fault_id = None
        if fault is not None:
            self.injected += 1
            fault_id = f"f{self.injected:05d}"
            self.on_fault(fault_id, fault, request_id, attempt)
        op = f"{request.method} {request.url.path}"
        sent, started = time.time(), time.perf_counter()

        def report(status: int | None, error: str | None) -> None:
            self.on_attempt(Attempt(request_id, attempt, op, status, error,
                                    (time.perf_counter() - started) * 1000, sent, time.time(),
                                    fault_id))

        try:
            response = await self._send(request, fault)
        except httpx.TransportError as exc:
            report(None, f"transport: {type(exc).__name__}")
            raise
        report(response.status_code, None if response.is_success else
               f"{response.status_code}")
        return response

    async def _send(self, request: httpx.Request, fault: Fault | None) -> httpx.Response:
        if fault is not None and fault.kind == "latency":
            await asyncio.sleep((fault.delay_ms or 0) / 1000)
            fault = None
        if fault is not None and fault.stage == "before":
            if fault.kind == "reset":
                raise httpx.ConnectError("injected: connection reset before sending",
                                         request=request)
            return httpx.Response(fault.status or 503, json=_envelope(fault.status or 503),
                                  request=request)
        response = await self.inner.handle_async_request(request)
        if fault is None:
            return response
        await response.aread()  # the server finished its work; its answer is then lost
        await response.aclose()
        if fault.kind == "reset":
            raise httpx.ReadError("injected: connection reset after the server answered",
                                  request=request)
        return httpx.Response(fault.status or 502, json=_envelope(fault.status or 502),
                              request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class ServerNemesis:
    """SIGKILL the bundled server at `kill_at_s` offsets from `run()` (but never sooner than
    `min_uptime_s` after the previous restart, so outages do not merge on a slow machine),
    wait `down_s`, start it again on the same database and port; `on_fault` is told before
    the kill and after the server answers health again. `stop()` cancels kills not yet
    begun (one in progress always completes its restart)."""

    def __init__(self, server: Any, kill_at_s: Sequence[float], down_s: float,
                 on_fault: OnFault, min_uptime_s: float = 0.0) -> None:
        self.server, self.kill_at_s, self.down_s = server, sorted(kill_at_s), down_s
        self.on_fault, self.min_uptime_s = on_fault, min_uptime_s
        self._stop = asyncio.Event()
        self.kills = 0

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        started = up_since = time.monotonic()
        for offset in self.kill_at_s:
            now = time.monotonic()
            delay = max(offset - (now - started), up_since + self.min_uptime_s - now)
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), delay)
                except TimeoutError:
                    pass
            if self._stop.is_set():
                return
            self.kills += 1
            fault_id = f"k{self.kills:03d}"
            self.on_fault(fault_id, Fault("kill", None), None, None)
            down = time.perf_counter()
            await asyncio.to_thread(self.server.kill)
            await asyncio.sleep(self.down_s)
            await asyncio.to_thread(self.server.start)
            up_since = time.monotonic()
            self.on_fault(f"{fault_id}r", Fault("restart", None, None,
                                                (time.perf_counter() - down) * 1000), None, None)
