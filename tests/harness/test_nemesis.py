"""The fault-injecting transport and schedule, on an in-process mock server (the faults run
test drives them against the real reference server)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from fleetprobe.client import MemClawClient, RetryPolicy
from fleetprobe.harness.nemesis import (
    REQUEST_HEADER,
    Attempt,
    Fault,
    FaultRates,
    FaultSchedule,
    FaultTransport,
)

NONE = FaultRates(error_5xx_before=0, error_5xx_after=0, error_429=0, reset_before=0,
                  reset_after=0, latency=0)


def only(**rates: float) -> FaultRates:
    return NONE.model_copy(update=rates)


def test_schedule_is_a_pure_function_of_seed_request_and_attempt() -> None:
    a, b = FaultSchedule(3, FaultRates()), FaultSchedule(3, FaultRates())
    draws = [(f"req-{i}", n) for i in range(300) for n in (1, 2)]
    assert [a.decide(*d) for d in draws] == [b.decide(*d) for d in reversed(draws)][::-1]
    assert [a.decide(*d) for d in draws] != [FaultSchedule(4, FaultRates()).decide(*d)
                                             for d in draws]
    kinds = {f.kind for d in draws if (f := a.decide(*d))}
    assert kinds == {"error_5xx", "error_429", "reset", "latency"}
    assert all(a.decide(f"req-{i}", 3) is None for i in range(300))  # max 2 per request


def test_schedule_refuses_probabilities_over_one() -> None:
    with pytest.raises(ValueError, match="sum to"):
        FaultSchedule(1, FaultRates(error_5xx_before=0.6, reset_after=0.6))


class Recorder:
    def __init__(self) -> None:
        self.faults: list[tuple[str, Fault]] = []
        self.attempts: list[Attempt] = []

    def fault(self, fault_id: str, fault: Fault, rid: str | None, n: int | None) -> None:
        self.faults.append((fault_id, fault))

    def attempt(self, a: Attempt) -> None:
        self.attempts.append(a)


def serve(rates: FaultRates, requests: int = 1) -> tuple[Recorder, list[httpx.Request],
                                                         list[httpx.Response | str]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"id": "m1"})

    rec = Recorder()
    transport = FaultTransport(httpx.MockTransport(handler), FaultSchedule(1, rates),
                               rec.fault, rec.attempt)
    outcomes: list[httpx.Response | str] = []

    async def go() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            for _ in range(requests):
                try:
                    outcomes.append(await http.post("/x", headers={REQUEST_HEADER: "w1"}))
                except httpx.TransportError as exc:
                    outcomes.append(type(exc).__name__)

    asyncio.run(go())
    return rec, seen, outcomes


def test_before_faults_never_reach_the_server() -> None:
    rec, seen, out = serve(only(error_5xx_before=1.0))
    assert not seen and out[0].status_code == 503
    assert out[0].json()["error"]["code"] == "UNAVAILABLE"
    rec, seen, out = serve(only(reset_before=1.0))
    assert not seen and out == ["ConnectError"]
    rec, seen, out = serve(only(error_429=1.0))
    assert not seen and out[0].status_code == 429
    assert [f.kind for _, f in rec.faults] == ["error_429"]


def test_after_faults_reach_the_server_and_lose_its_answer() -> None:
    rec, seen, out = serve(only(error_5xx_after=1.0))
    assert len(seen) == 1 and out[0].status_code == 502
    rec, seen, out = serve(only(reset_after=1.0))
    assert len(seen) == 1 and out == ["ReadError"]
    assert rec.attempts[0].status is None and rec.attempts[0].fault_id == rec.faults[0][0]
    assert rec.attempts[0].error == "transport: ReadError"


def test_attempts_are_counted_per_request_and_the_header_is_stripped() -> None:
    rec, seen, out = serve(only(reset_after=1.0), requests=3)
    assert [a.attempt for a in rec.attempts] == [1, 2, 3]
    assert [a.fault_id is not None for a in rec.attempts] == [True, True, False]
    assert all(REQUEST_HEADER.lower() not in r.headers for r in seen)
    assert out[-1].status_code == 201 and len(seen) == 3


def test_latency_is_added_and_the_request_still_served() -> None:
    rec, seen, out = serve(only(latency=1.0, latency_ms=120))
    assert len(seen) == 1 and out[0].status_code == 201
    assert rec.attempts[0].latency_ms >= 110 and rec.faults[0][1].delay_ms == 120


def test_client_retries_through_injected_faults_to_one_answer() -> None:
    """The harness's own client: two injected failures, then the clean third attempt."""
    rec = Recorder()
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.headers.get("Idempotency-Key"))
        return httpx.Response(201, json={"id": "m1"})

    transport = FaultTransport(httpx.MockTransport(handler),
                               FaultSchedule(1, only(reset_after=1.0)), rec.fault, rec.attempt)

    async def go():
        async with MemClawClient("http://test", transport=transport,
                                 retry=RetryPolicy(5, 0.0, 0.0)) as client:
            from fleetprobe.client import Credential
            cred = Credential("tenant", "t", key="k")
            return await client.write(cred, {"content": "x"}, headers={
                "Idempotency-Key": "k1", REQUEST_HEADER: "w1"})

    result = asyncio.run(go())
    assert result.status == 201 and result.attempts == 3
    assert calls == ["k1", "k1", "k1"]  # the server saw every attempt, same key each time


class FakeServer:
    """Stands in for ReferenceServer: records kill / start calls and their times."""

    def __init__(self, start_s: float = 0.0) -> None:
        self.calls: list[tuple[str, float]] = []
        self.start_s = start_s

    def kill(self) -> None:
        self.calls.append(("kill", time.monotonic()))

    def start(self) -> None:
        time.sleep(self.start_s)
        self.calls.append(("start", time.monotonic()))


def test_server_nemesis_kills_restarts_and_keeps_a_minimum_uptime() -> None:
    from fleetprobe.harness.nemesis import ServerNemesis

    server, rec = FakeServer(start_s=0.05), Recorder()
    nemesis = ServerNemesis(server, [0.0, 0.01], down_s=0.02, on_fault=rec.fault,
                            min_uptime_s=0.2)
    asyncio.run(nemesis.run())
    assert [c for c, _ in server.calls] == ["kill", "start", "kill", "start"]
    assert [f.kind for _, f in rec.faults] == ["kill", "restart", "kill", "restart"]
    assert [i for i, _ in rec.faults] == ["k001", "k001r", "k002", "k002r"]
    assert server.calls[2][1] - server.calls[1][1] >= 0.2  # up at least min_uptime_s
    assert rec.faults[1][1].delay_ms >= 70  # down_s + the restart itself


def test_server_nemesis_stop_cancels_kills_not_yet_begun() -> None:
    from fleetprobe.harness.nemesis import ServerNemesis

    server, rec = FakeServer(), Recorder()
    nemesis = ServerNemesis(server, [30.0], down_s=0.0, on_fault=rec.fault)

    async def go() -> None:
        task = asyncio.create_task(nemesis.run())
        await asyncio.sleep(0.05)
        nemesis.stop()
        await asyncio.wait_for(task, 2)

    asyncio.run(go())
    assert server.calls == [] and rec.faults == []
