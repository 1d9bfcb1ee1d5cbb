"""World-building writes whose answer was lost: the retry meets the first attempt's row (an
exact-duplicate 409 naming it), and the matrix takes that row as built instead of leaving it
missing. Against the real reference server, the loss injected by the nemesis transport
after the server answered (the hazard a loaded engine run met)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from fleetprobe.client import Credential, MemClawClient, Result, RetryPolicy
from fleetprobe.harness.nemesis import REQUEST_HEADER, FaultRates, FaultSchedule, FaultTransport
from fleetprobe.harness.targets import Target
from fleetprobe.world.build import landed_first_attempt

LOSE_FIRST_ANSWER = FaultRates(error_5xx_before=0, error_5xx_after=0, error_429=0,
                               reset_before=0, reset_after=1.0, latency=0,
                               max_faults_per_request=1)


def lossy_client(target: Target) -> MemClawClient:
    transport = FaultTransport(httpx.AsyncHTTPTransport(), FaultSchedule(1, LOSE_FIRST_ANSWER),
                               lambda *_: None, lambda _: None)
    return MemClawClient(target.base_url, retry=RetryPolicy(3, 0.01, 0.05),
                         transport=transport)


async def write_then_recover(target: Target, body: dict[str, Any], request_id: str,
                             ) -> tuple[Result, str | None, Result | None]:
    async with lossy_client(target) as client:
        result = await client.write(target.tenant, body, headers={REQUEST_HEADER: request_id})
        memory_id, check = await landed_first_attempt(client, target.tenant, body, result)
    return result, memory_id, check


def test_a_write_whose_answer_was_lost_is_found_by_its_retry(target: Target) -> None:
    body = {"agent_id": "writer-1", "fleet_id": "fleet-1", "visibility": "scope_team",
            "content": "Retried write: the ledger for the Arbor project closes on the 14th."}
    result, memory_id, check = asyncio.run(write_then_recover(target, body, "w1"))
    assert result.status == 409 and result.attempts == 2, result  # the hazard happened
    assert memory_id is not None and memory_id in (result.error or "")
    assert check is not None and check.ok and check.body["content"] == body["content"]


def test_a_duplicate_of_another_agents_row_is_not_taken_as_built(target: Target) -> None:
    """Only the retrying write's own row counts: same content under another agent is not it."""
    content = "Retried write: the Arbor ledger is audited by the finance fleet."
    first = {"agent_id": "writer-2", "fleet_id": "fleet-1", "visibility": "scope_team",
             "content": content}
    stored, _, _ = asyncio.run(write_then_recover(target, first, "w2"))
    assert stored.status == 409  # its own first attempt: found (previous test's shape)
    duplicate_id = (stored.error or "").rsplit(" ", 1)[-1]
    forged = Result("POST /api/v1/memories", 409, None, 1.0, 2,
                    f"409 Duplicate memory exists: {duplicate_id}")
    other = {**first, "agent_id": "writer-3"}

    async def judge() -> tuple[str | None, Result | None]:
        async with MemClawClient(target.base_url) as client:
            return await landed_first_attempt(client, target.tenant, other, forged)

    memory_id, check = asyncio.run(judge())
    assert check is not None and check.ok  # it was read back, and it is writer-2's row
    assert memory_id is None


def test_a_first_answer_409_is_never_recovered(target: Target) -> None:
    """One attempt answering 409 is a real duplicate, not a lost answer: no read-back."""
    answer = Result("POST /api/v1/memories", 409, None, 1.0, 1,
                    "409 Duplicate memory exists: 00000000-0000-0000-0000-000000000000")

    async def judge() -> tuple[str | None, Result | None]:
        async with MemClawClient(target.base_url) as client:
            return await landed_first_attempt(client, Credential("tenant", "t", "k"), {},
                                              answer)

    assert asyncio.run(judge()) == (None, None)
