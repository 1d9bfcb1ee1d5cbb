"""The async MemClaw REST client: one method per endpoint the experiments use, paced below
the target's limits, retried only where `RetryPolicy` says (the package docstring says why),
each call answered as a `Result`."""

from __future__ import annotations

import asyncio
import functools
import ssl
import threading
import time
from dataclasses import replace
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from fleetprobe.client.credentials import Credential
from fleetprobe.client.pacing import PacerSet
from fleetprobe.client.results import (
    Result,
    RetryPolicy,
    short_error,
)

API = "/api/v1"

# Set by the first Ctrl-C of a run in the main thread (`run.run_experiment`): from then on
# every request raises, so a run stops even if a library's cancel scope absorbed the
# cancellation that Ctrl-C sent (seen once on a loaded machine: a run went on to complete).
INTERRUPTED = threading.Event()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx builds a default context (the CA bundle, ~30 ms of CPU) per client; a run makes
    a client per target and the tests hundreds, so one per process serves them all."""
    return ssl.create_default_context()


class MemClawClient:
    """Async client for the MemClaw REST endpoints the experiments use.

    Use as `async with MemClawClient(base_url) as client:`. One instance per run: it owns the
    connection pool, the per-class pacers and the concurrency cap.
    """

    def __init__(
        self,
        base_url: str,
        *,
        retry: RetryPolicy | None = None,
        pacing: dict[str, float | None] | None = None,
        max_concurrency: int = 8,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.pacers = PacerSet(pacing)
        self._tenant_pacers: dict[str, PacerSet] = {}
        self._slots = asyncio.Semaphore(max_concurrency)
        self._secrets: set[str] = set()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=timeout_s,
            transport=transport,
            limits=httpx.Limits(max_connections=max_concurrency * 2),
            verify=_tls_context(),
        )

    async def __aenter__(self) -> MemClawClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def pace_separately(self, tenant_id: str) -> None:
        """Give one tenant pacers of its own: the paper's rate limits are per tenant, so
        work spread over several tenants may go at the full rate in each."""
        self._tenant_pacers.setdefault(tenant_id, self.pacers.fresh())

    def remember_secret(self, secret: str | None) -> None:
        if secret:
            self._secrets.add(secret)

    def known_secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    # -- the one request path ------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        cred: Credential | None = None,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        request_class: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> Result:
        """Send one logical request, retrying per policy; never raises on HTTP status."""
        if INTERRUPTED.is_set():
            raise asyncio.CancelledError("interrupted (Ctrl-C)")
        policy = retry or self.retry
        op = f"{method} {API}{path}" if not path.startswith(API) else f"{method} {path}"
        url = path if path.startswith(API) else f"{API}{path}"
        hdrs = dict(headers or {})
        if cred is not None:
            self.remember_secret(cred.key)
            hdrs.update(cred.headers())
        attempts = 0

        async def attempt() -> Result:
            nonlocal attempts
            attempts += 1
            pacers = self._tenant_pacers.get(cred.tenant_id) if cred is not None else None
            await (pacers or self.pacers).acquire(request_class)
            async with self._slots:
                return await self._send_once(op, method, url, json, params, hdrs, attempts)

        # Most requests succeed first time: building a tenacity loop for each cost a tenth
        # of the harness's CPU. A retryable first answer enters the loop as its attempt 1.
        first = await attempt()
        if not policy.should_retry(first):
            return first
        replay = [first]

        async def again() -> Result:
            return replay.pop() if replay else await attempt()

        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=wait_exponential(multiplier=policy.backoff_base_s, max=policy.backoff_max_s),
            retry=retry_if_result(policy.should_retry),
            retry_error_callback=lambda state: state.outcome.result(),
            reraise=True,
        )
        return await retrying(again)

    async def _send_once(
        self,
        op: str,
        method: str,
        url: str,
        json: Any,
        params: dict[str, Any] | None,
        headers: dict[str, str],
        attempts: int,
    ) -> Result:
        started = time.perf_counter()
        try:
            response = await self._http.request(
                method, url, json=json, params=params, headers=headers
            )
            latency_ms = (time.perf_counter() - started) * 1000.0
        except httpx.TransportError as exc:
            latency_ms = (time.perf_counter() - started) * 1000.0
            return Result(op, None, None, latency_ms, attempts, f"transport: {type(exc).__name__}")
        body, shape_error = _decode(response)
        error = None
        if not response.is_success:
            error = short_error(response.status_code, body)
        elif shape_error:
            error = shape_error
        return Result(op, response.status_code, body, latency_ms, attempts, error)

    # -- endpoints -------------------------------------------------------------------------

    async def health(self) -> Result:
        return await self.request("GET", "/health")

    async def version(self) -> Result:
        return await self.request("GET", "/version")

    async def whoami(self, cred: Credential) -> Result:
        return await self.request("GET", "/whoami", cred=cred)

    async def write(self, cred: Credential, memory: dict[str, Any], **kw: Any) -> Result:
        body = {"tenant_id": cred.tenant_id, **memory}
        return await self.request(
            "POST", "/memories", cred=cred, json=body, request_class="write", **kw
        )

    async def bulk(
        self, cred: Credential, batch: dict[str, Any], attempt_id: str, **kw: Any
    ) -> Result:
        body = {"tenant_id": cred.tenant_id, **batch}
        return await self.request(
            "POST",
            "/memories/bulk",
            cred=cred,
            json=body,
            headers={"X-Bulk-Attempt-Id": attempt_id},
            request_class="bulk",
            **kw,
        )

    async def get(self, cred: Credential, memory_id: str, **kw: Any) -> Result:
        return await self.request(
            "GET", f"/memories/{memory_id}", cred=cred, params={"tenant_id": cred.tenant_id}, **kw
        )

    async def list_memories(self, cred: Credential, **query: Any) -> Result:
        params = {"tenant_id": cred.tenant_id, **query}
        return await self.request("GET", "/memories", cred=cred, params=params)

    async def search(self, cred: Credential, query: dict[str, Any], **kw: Any) -> Result:
        body = {"tenant_id": cred.tenant_id, **query}
        return await self.request(
            "POST", "/search", cred=cred, json=body, request_class="search", **kw
        )

    async def recall(self, cred: Credential, query: dict[str, Any], **kw: Any) -> Result:
        body = {"tenant_id": cred.tenant_id, **query}
        return await self.request(
            "POST", "/recall", cred=cred, json=body, request_class="search", **kw
        )

    async def generate_insights(self, cred: Credential, request: dict[str, Any]) -> Result:
        body = {"tenant_id": cred.tenant_id, **request}
        return await self.request("POST", "/insights/generate", cred=cred, json=body)

    async def contradictions(self, cred: Credential, memory_id: str) -> Result:
        return await self.request(
            "GET",
            f"/memories/{memory_id}/contradictions",
            cred=cred,
            params={"tenant_id": cred.tenant_id},
        )

    async def upsert_entity(self, cred: Credential, entity: dict[str, Any]) -> Result:
        body = {"tenant_id": cred.tenant_id, **entity}
        return await self.request("POST", "/entities/upsert", cred=cred, json=body)

    async def redistribute(
        self,
        cred: Credential,
        memory_ids: list[str],
        target_agent_id: str,
        requester_agent_id: str,
    ) -> Result:
        return await self.request(
            "POST",
            "/memories/redistribute",
            cred=cred,
            params={"tenant_id": cred.tenant_id, "agent_id": requester_agent_id},
            json={"memory_ids": memory_ids, "target_agent_id": target_agent_id},
        )

    async def patch_trust(
        self, cred: Credential, agent_id: str, trust_level: int, fleet_id: str | None = None
    ) -> Result:
        body: dict[str, Any] = {"trust_level": trust_level}
        if fleet_id is not None:
            body["fleet_id"] = fleet_id
        return await self.request(
            "PATCH",
            f"/agents/{agent_id}/trust",
            cred=cred,
            params={"tenant_id": cred.tenant_id},
            json=body,
        )

    async def provision_agent_key(
        self,
        cred: Credential,
        agent_id: str,
        *,
        initial_trust: int = 1,
        initial_fleet: str | None = None,
        label: str | None = None,
    ) -> tuple[Result, Credential | None]:
        """Self-provision an agent key. The result's body has `raw_key` redacted; the key
        lives only in the returned `Credential` (None when provisioning failed)."""
        body: dict[str, Any] = {"agent_id": agent_id, "initial_trust": initial_trust}
        if initial_fleet is not None:
            body["initial_fleet"] = initial_fleet
        if label is not None:
            body["label"] = label
        result = await self.request("POST", "/admin/agent-keys/provision", cred=cred, json=body)
        raw_key = result.body.get("raw_key") if isinstance(result.body, dict) else None
        if not result.ok or not isinstance(raw_key, str) or not raw_key:
            if result.ok:
                result = replace(result, error="unexpected body: no raw_key in provision response")
            return result, None
        self.remember_secret(raw_key)
        redacted = {**result.body, "raw_key": "<redacted>"}
        agent_cred = Credential(
            kind="agent",
            tenant_id=cred.tenant_id,
            key=raw_key,
            agent_id=str(result.body.get("agent_id") or agent_id),
            trust=initial_trust,
        )
        return replace(result, body=redacted), agent_cred


def _decode(response: httpx.Response) -> tuple[Any | None, str | None]:
    """JSON body or None; a second value names an unexpected shape on a success status."""
    if response.status_code == 204 or not response.content:
        return None, None
    try:
        return response.json(), None
    except ValueError:
        ctype = response.headers.get("content-type", "?")
        return None, f"unexpected body: not JSON ({ctype})"
