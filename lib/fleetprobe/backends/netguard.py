"""No network from a backend adapter: an audit hook that refuses every non-loopback connect.

Installed first thing in the adapter process (before any backend library is imported), so a
telemetry client, a model download or an LLM call that the switches in `offline_env` missed
cannot leave the machine: Python raises `PermissionError` at `socket.connect` (and at name
resolution of a non-loopback host) before any packet is sent, and the attempt is recorded.
`GET /api/v1/version` reports the count (`network.outbound_refused`) so a run's manifest shows
that nothing tried. Native code that opens sockets without Python's socket module is outside
an audit hook's reach; the backends measured here keep their data in local files.
"""

from __future__ import annotations

import ipaddress
import sys
import threading
from typing import Any

# Switches the backends document for telemetry, tracing and hub downloads.
OFFLINE_ENV = {
    "MEM0_TELEMETRY": "False",
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "ANONYMIZED_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LITELLM_TELEMETRY": "False",
}
OFFLINE_ENV["GRAPHITI_TELEMETRY_ENABLED"] = "false"  # graphiti-core's PostHog telemetry

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_lock = threading.Lock()
_attempts: list[str] = []
_installed = False
MAX_RECORDED = 20


def is_loopback(host: Any) -> bool:
    if not isinstance(host, str):
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _is_ip(host: Any) -> bool:
    try:
        ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:
        return False
    return True


def _refuse(what: str) -> None:
    with _lock:
        _attempts.append(what)
    raise PermissionError(f"fleetprobe backend adapter: outbound network refused ({what})")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        sock, address = args[0], args[1]
        if not isinstance(address, tuple):  # AF_UNIX path: local
            return
        if getattr(sock, "family", None) not in (2, 10):  # AF_INET, AF_INET6 only
            return
        if not is_loopback(address[0]):
            _refuse(f"connect {address[0]}:{address[1] if len(address) > 1 else '?'}")
    elif event == "socket.getaddrinfo":
        host = args[0]
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        if host is not None and host != "" and not is_loopback(host) and not _is_ip(host):
            _refuse(f"resolve {host}")  # an IP literal resolves locally; its connect is checked


def install() -> None:
    """Idempotent; an audit hook cannot be removed once added (by design)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def report() -> dict[str, Any]:
    with _lock:
        return {"guard": "audit-hook" if _installed else "none",
                "outbound_refused": len(_attempts), "attempts": list(_attempts[:MAX_RECORDED])}
