"""The adapter calls a backend one call at a time unless the backend says its store is safe
for concurrent calls (`Backend.concurrent`: SqliteStore and PostgresStore serialize on their
connection's lock, mem0's pgvector store pools connections): two calls that each wait for the
other finish only when the adapter lets them overlap."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

import pytest

from fleetprobe.backends.app import AdapterState


@dataclass
class Rendezvous:
    """A backend call that returns only once a second call has arrived meanwhile."""

    concurrent: bool
    name: str = "test"

    def __post_init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=2.0)

    def meet(self) -> str:
        self.barrier.wait()
        return "met"


async def two_calls(backend: Rendezvous) -> list[str]:
    state = AdapterState(backend, None, None, asyncio.Lock())  # type: ignore[arg-type]
    return await asyncio.gather(state.call(backend.meet), state.call(backend.meet))


def test_a_concurrent_backend_takes_calls_at_once() -> None:
    assert asyncio.run(two_calls(Rendezvous(concurrent=True))) == ["met", "met"]


def test_any_other_backend_gets_one_call_at_a_time() -> None:
    with pytest.raises(threading.BrokenBarrierError):  # the second call waited on the lock
        asyncio.run(two_calls(Rendezvous(concurrent=False)))
