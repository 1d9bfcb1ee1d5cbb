"""Header and body read deadlines (issue 25): slow-header connections are closed, a stalled
body is answered 408 and closed, within the limits the server is started with; a healthy
keep-alive client is not disturbed and another tenant's searches keep being answered."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from reference_server.launch.process import ReferenceServer

from .conftest import FAST_ARGS, HOSTILE_LIMIT_S, Api

LIMIT_S = 1.0
# closed within 2x the header limit (checked once per period), plus slack for a loaded machine
HEADER_BOUND_S = 2 * LIMIT_S + 2.0
BODY_BOUND_S = LIMIT_S + 2.0


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    with ReferenceServer(profile="hardened", extra_args=[
            *FAST_ARGS, "--header-timeout", str(LIMIT_S), "--body-timeout", str(LIMIT_S)]) as srv:
        yield srv


def _connect(srv: ReferenceServer) -> socket.socket:
    host, port = srv.base_url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _closed_after(sock: socket.socket, started: float, bound_s: float) -> tuple[float, bytes]:
    """Reads until EOF; returns when it came and what was received before it."""
    sock.settimeout(bound_s + 1)
    got = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return time.monotonic() - started, got
        got += chunk


def _one_response(sock: socket.socket) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    head, _, body = got.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def _slow_headers(srv: ReferenceServer, closed_at: list[float]) -> None:
    sock = _connect(srv)
    started = time.monotonic()
    sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
    try:
        for i in range(40):  # a header line every 0.25 s, never the blank line
            sock.sendall(f"X-Slow-{i}: y\r\n".encode())
            time.sleep(0.25)
    except OSError:  # the server closed it
        pass
    try:
        elapsed, _ = _closed_after(sock, started, HEADER_BOUND_S)
    except TimeoutError:
        elapsed = float("inf")
    closed_at.append(elapsed)
    sock.close()


def test_slow_headers_are_closed_and_others_still_served(server: ReferenceServer) -> None:
    tenant_id, key = server.create_tenant()
    api = Api(server.base_url, key, tenant_id, HOSTILE_LIMIT_S)
    assert api.write("A row another tenant searches for during the attack",
                     agent_id="w").status_code == 201
    closed_at: list[float] = []
    attackers = [threading.Thread(target=_slow_headers, args=(server, closed_at))
                 for _ in range(20)]
    for t in attackers:
        t.start()
    latencies = []
    while any(t.is_alive() for t in attackers):
        started = time.monotonic()
        assert api.search("row another tenant").status_code == 200
        latencies.append(time.monotonic() - started)
        time.sleep(0.05)
    for t in attackers:
        t.join()
    api.close()
    assert len(closed_at) == 20 and max(closed_at) <= HEADER_BOUND_S, closed_at
    assert len(latencies) >= 5 and max(latencies) < 2.0, latencies


def test_stalled_body_gets_408_and_is_closed(server: ReferenceServer) -> None:
    sock = _connect(server)
    started = time.monotonic()
    sock.sendall(b"POST /api/v1/memories HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                 b"\r\nContent-Length: 52428800\r\nX-API-Key: mc_whatever\r\n\r\n"
                 + b"{" + b" " * 1023)
    elapsed, got = _closed_after(sock, started, BODY_BOUND_S)
    sock.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), got[:200]
    assert json.loads(body)["error"]["code"] == "REQUEST_TIMEOUT"
    assert LIMIT_S * 0.9 <= elapsed <= BODY_BOUND_S, elapsed


def test_a_healthy_keep_alive_client_is_not_cut(server: ReferenceServer) -> None:
    """Two complete requests on one connection, each well inside the limit, across more
    than one deadline check."""
    sock = _connect(server)
    for _ in range(3):
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = _one_response(sock)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:100]
        time.sleep(LIMIT_S * 0.6)
    sock.close()


CAP = 4


def _served(sock: socket.socket) -> bool:
    """True when a health request on `sock` is answered 200; False when the server closed
    the connection instead (EOF or reset before a status line)."""
    sock.settimeout(5)
    try:
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        return False
    return b" 200 " in got.split(b"\r\n")[0]


def _connect_from(srv: ReferenceServer, source: str) -> socket.socket:
    host, port = srv.base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def test_a_client_over_its_connection_cap_is_refused_and_others_are_not() -> None:
    """A client holding `--max-connections-per-client` open connections has the next one
    closed on arrival; once it lets one go it may open another, and another client is
    served meanwhile. The capped client speaks from 127.0.0.2 (also loopback), apart from
    the launcher's own connections from 127.0.0.1."""
    with ReferenceServer(profile="hardened", extra_args=[
            *FAST_ARGS, "--max-connections-per-client", str(CAP)]) as srv:
        held = [_connect_from(srv, "127.0.0.2") for _ in range(CAP)]
        assert all(_served(s) for s in held)
        extra = _connect_from(srv, "127.0.0.2")
        elapsed, got = _closed_after(extra, time.monotonic(), 2.0)
        assert got == b"" and elapsed < 2.0  # closed before anything was read or sent
        other = _connect(srv)
        assert _served(other)
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:  # the server counts the closed one down when it sees the close
            again = _connect_from(srv, "127.0.0.2")
            if _served(again):
                break
            again.close()
            assert time.monotonic() < deadline, "a freed slot was never given back"
            time.sleep(0.1)
        for sock in [*held, extra, other, again]:
            sock.close()


def test_the_cap_must_be_positive() -> None:
    from reference_server.launch.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--max-connections-per-client", "0"])
