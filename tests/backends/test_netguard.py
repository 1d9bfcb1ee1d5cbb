"""The adapters' network guard refuses non-loopback connections before a packet leaves, and
records them; loopback stays usable. Runs in a child process: an audit hook is permanent."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

LIB = str(Path(__file__).resolve().parents[2] / "lib")

PROBE = textwrap.dedent("""
    import json, socket, sys
    from fleetprobe.backends import netguard
    netguard.install()
    out = {}
    server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=2)
    out["loopback"] = "ok"; client.close(); server.close()
    for name, call in (("ip", lambda: socket.create_connection(("192.0.2.1", 9), timeout=1)),
                       ("name", lambda: socket.getaddrinfo("example.invalid", 443))):
        try:
            call()
            out[name] = "connected"
        except PermissionError as exc:
            out[name] = "refused: " + str(exc)
        except OSError as exc:
            out[name] = "other: " + type(exc).__name__
    out["report"] = netguard.report()
    print(json.dumps(out))
""")


def test_guard_refuses_outbound_and_records_it() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": LIB, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loopback"] == "ok"
    assert out["ip"].startswith("refused") and "192.0.2.1:9" in out["ip"]
    assert out["name"].startswith("refused") and "example.invalid" in out["name"]
    assert out["report"]["outbound_refused"] == 2
    assert out["report"]["guard"] == "audit-hook"


def test_offline_switches_cover_each_backend() -> None:
    from fleetprobe.backends.netguard import OFFLINE_ENV

    for switch in ("MEM0_TELEMETRY", "CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED",
                   "LANGSMITH_TRACING"):
        assert switch in OFFLINE_ENV
