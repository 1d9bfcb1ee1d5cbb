"""The client against the real reference server: what is retried and what is data."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fleetprobe.client import Credential, MemClawClient, RetryPolicy
from fleetprobe.drive.run import arun_experiment
from fleetprobe.harness.experiment import TargetUnavailable, UnexpectedShape
from fleetprobe.harness.targets import Target, TargetError, preflight

FAST_RETRY = RetryPolicy(max_attempts=4, backoff_base_s=0.05, backoff_max_s=0.5)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def memory(agent: str, text: str) -> dict[str, Any]:
    return {"agent_id": agent, "content": f"{text} {uuid.uuid4().hex}"}


async def _client_calls(target: Target) -> dict[str, Any]:
    async with MemClawClient(target.base_url, retry=FAST_RETRY) as client:
        ok = await client.write(target.tenant, memory("agent-a", "The cache TTL is 30 seconds."))
        too_short = await client.write(target.tenant, {"agent_id": "agent-a", "content": "short"})
        missing = await client.get(target.tenant, str(uuid.uuid4()))
        fetched = await client.get(target.tenant, ok.body["id"])
        return {"ok": ok, "too_short": too_short, "missing": missing, "fetched": fetched}


def test_4xx_is_returned_as_data_not_retried(target: Target) -> None:
    calls = run(_client_calls(target))
    assert calls["ok"].status == 201 and calls["ok"].attempts == 1 and calls["ok"].error is None
    short = calls["too_short"]
    assert short.status == 422 and short.attempts == 1
    assert short.error.startswith("422 ") and short.body["error"]["code"] == "INVALID_ARGUMENTS"
    assert calls["missing"].status == 404 and calls["missing"].attempts == 1
    assert calls["fetched"].status == 200 and calls["fetched"].body["agent_id"] == "agent-a"


async def _burst(target: Target, retry: RetryPolicy, n: int) -> list[Any]:
    async with MemClawClient(target.base_url, retry=retry, max_concurrency=n) as client:
        writes = [client.write(target.tenant, memory("agent-b", f"Burst fact number {i}."))
                  for i in range(n)]
        return await asyncio.gather(*writes)


def test_429_is_retried_until_admitted(start_server: Any) -> None:
    from fleetprobe.harness.targets import target_for_server

    target = target_for_server(start_server(extra_args=("--write-rate", "3/second")))
    results = run(_burst(target, RetryPolicy(max_attempts=8, backoff_base_s=0.3,
                                             backoff_max_s=1.0), 8))
    assert all(r.status == 201 for r in results)
    assert any(r.attempts > 1 for r in results), "the burst never hit the 3/s limit"

    no_retry = run(_burst(target, RetryPolicy(retry_on_429=False), 8))
    limited = [r for r in no_retry if r.status == 429]
    assert limited and all(r.attempts == 1 for r in limited)
    assert limited[0].body["error"]["code"] == "RATE_LIMITED"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_transport_error_is_retried_then_reported() -> None:
    async def call() -> Any:
        async with MemClawClient(f"http://127.0.0.1:{free_port()}", retry=FAST_RETRY) as c:
            return await c.health()

    outcome = run(call())
    assert outcome.status is None and outcome.attempts == FAST_RETRY.max_attempts
    assert outcome.error == "transport: ConnectError"


def test_preflight_names_wrong_key_and_unreachable_endpoint(target: Target) -> None:
    wrong = Target("reference", target.base_url,
                   Credential("tenant", target.tenant.tenant_id, key="mc_wrong_key"))

    async def check(t: Target) -> None:
        async with MemClawClient(t.base_url, retry=FAST_RETRY) as client:
            await preflight(client, t)

    with pytest.raises(TargetError, match="rejected the credential") as err:
        run(check(wrong))
    assert "mc_wrong_key" not in str(err.value)
    gone = Target("live", f"http://127.0.0.1:{free_port()}", target.tenant)
    with pytest.raises(TargetError, match="cannot reach .*MEMCLAW_API_URL"):
        run(check(gone))
    other = Target("reference", target.base_url, target.tenant, profile_requested="naive")
    with pytest.raises(TargetError, match="serves profile 'memclaw-2026-05-30'"):
        run(check(other))
    run(check(target))
    assert target.info["profile"] == "memclaw-2026-05-30"


def test_provision_agent_key_redacts_raw_key(target: Target) -> None:
    async def provision() -> Any:
        async with MemClawClient(target.base_url, retry=FAST_RETRY) as client:
            result, cred = await client.provision_agent_key(
                target.tenant, "agent-k", initial_trust=2, initial_fleet="fleet-0")
            who = await client.whoami(cred) if cred else None
            return result, cred, who, client.known_secrets()

    result, cred, who, secrets = run(provision())
    assert result.ok, result.error
    assert result.body["raw_key"] == "<redacted>"
    assert cred is not None and cred.key in secrets and cred.key not in repr(cred)
    assert who.status == 200 and who.body["agent_id"] == "agent-k"


def test_unreachable_target_leaves_an_incomplete_trace(target: Target, traces_root: Any) -> None:
    gone = Target("live", f"http://127.0.0.1:{free_port()}", target.tenant,
                  secrets=target.secrets)
    with pytest.raises(TargetError):
        run(arun_experiment("provenance", {
            "traces_root": str(traces_root), "chains": 1, "progress": False,
            "client": {"max_attempts": 2, "backoff_base_s": 0.01}}, target=gone))
    # failed before its first phase: set aside, not among the real runs
    assert [p.name for p in traces_root.iterdir()] == ["_failed"]
    (run_dir,) = (traces_root / "_failed").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["complete"] is False
    assert manifest["incomplete_reason"].startswith("target: cannot reach")
    assert TargetUnavailable.__mro__[1] is TargetError


class NotMemClaw(BaseHTTPRequestHandler):
    """A real HTTP server that passes the preflight but answers writes without an id."""

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._send(200, {"version": "9.9"} if "version" in self.path else {"items": []})

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._send(201, {"accepted": True})

    def log_message(self, *args: Any) -> None:
        pass


def test_unexpected_shape_stops_the_run_and_names_it(traces_root: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotMemClaw)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        odd = Target("live", f"http://127.0.0.1:{server.server_port}",
                     Credential("tenant", "t1", key="mc_not_a_real_key"))
        with pytest.raises(UnexpectedShape, match="POST /api/v1/memories answered 201"):
            run(arun_experiment("provenance", {"traces_root": str(traces_root),
                                               "chains": 1, "progress": False}, target=odd))
    finally:
        server.shutdown()
    (run_dir,) = traces_root.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["complete"] is False and "no id field" in manifest["incomplete_reason"]
    (write,) = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert write["status"] == 201 and write["error"] == "unexpected body: no id field"


def test_after_ctrl_c_every_request_raises_without_reaching_the_server(target: Target) -> None:
    """`client.INTERRUPTED` (set by a run's first Ctrl-C) makes every later request raise
    before it is sent, even where a library absorbed the cancellation; cleared (a new run),
    requests go again."""
    from fleetprobe.client import INTERRUPTED

    async def go() -> tuple[int, int]:
        async with MemClawClient(target.base_url) as client:
            before = (await client.health()).status
            INTERRUPTED.set()
            try:
                with pytest.raises(asyncio.CancelledError):
                    await client.health()
            finally:
                INTERRUPTED.clear()
            return before, (await client.health()).status

    assert run(go()) == (200, 200)
