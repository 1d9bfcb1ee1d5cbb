"""Optional latency model (off by default; `--latency-model`).

Simulates the shape the paper reports for strong-mode writes (p50 ~1.8 s, a heavy tail
under contention): each strong write takes a lognormal service time in a bounded worker
pool, so concurrent writes queue. When on, `/api/v1/version` says `latency_simulated: true`
so a trace records that latency was simulated.
"""

from __future__ import annotations

import asyncio
import math
import random

from ..governance.profiles import LatencyModel


class LatencySimulator:
    def __init__(self, model: LatencyModel, seed: int = 0) -> None:
        self.model = model
        self._rng = random.Random(seed)
        self._pool = asyncio.Semaphore(model.enrichment_workers)

    def service_time_s(self) -> float:
        return self._rng.lognormvariate(math.log(self.model.strong_enrichment_median_s),
                                        self.model.strong_enrichment_sigma)

    async def strong_enrichment(self) -> None:
        async with self._pool:
            await asyncio.sleep(self.service_time_s())
