"""`python -m fleetprobe engine up|down|status [--src PATH]`: MemClaw's open-source engine on
loopback, built once from a checkout or source archive (docs/engine.md).

`up` prints where the engine answers and exits, leaving it running; `status` exits 0 when
every instance found is up (1 when one is down or none was found); `down` stops them all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from fleetprobe.engine.errors import EngineError
from fleetprobe.engine.instance import ENV_GATE_KEY, down, status, up
from fleetprobe.engine.services import DEFAULT_RATE_LIMITS, EngineState
from fleetprobe.engine.source import ENV_SRC


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetprobe engine", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    src_help = (f"engine checkout or .tar.gz source archive (default: {ENV_SRC}; status/down "
                "without one: every instance in the cache)")
    start = commands.add_parser("up", help="build (once) and start the engine")
    start.add_argument("--src", help=src_help)
    start.add_argument("--auth", choices=("headers", "gate"), default="headers",
                       help=f"identity from X-Tenant-ID/X-Agent-ID alone, or behind a gate key "
                            f"read from {ENV_GATE_KEY} (default headers)")
    for name, default in DEFAULT_RATE_LIMITS.items():
        start.add_argument(f"--{name.replace('_', '-')}-rate", dest=name, default=default,
                           help=f"RATE_LIMIT_{name.upper()} (default {default})")
    start.add_argument("--json", action="store_true", help="print the state as JSON")
    stop = commands.add_parser("down", help="stop the engine's processes and its database")
    stop.add_argument("--src", help=src_help)
    show = commands.add_parser("status", help="what runs where")
    show.add_argument("--src", help=src_help)
    show.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "up":
            limits = {name: getattr(args, name) for name in DEFAULT_RATE_LIMITS}
            state = up(args.src, args.auth, limits, log=_err)
            print(json.dumps(_local(state), indent=2) if args.json else describe(state))
            return 0
        if args.command == "down":
            stopped = down(args.src, log=_err)
            for state in stopped:
                print(f"engine {state.version} @ {state.commit[:7]}: stopped "
                      f"(logs kept in {state.home}/logs)")
            if not stopped:
                print("engine: nothing was running")
            return 0
        found = status(args.src)
        if args.json:
            print(json.dumps([{**_local(s), "health": h} for s, h in found], indent=2))
        for state, health in ([] if args.json else found):
            print(describe(state, health))
        if not found and not args.json:
            print("engine: no instance found (start one with `fleetprobe engine up --src PATH`)")
        return 0 if found and all(h["up"] for _, h in found) else 1
    except EngineError as exc:
        print(f"fleetprobe engine: {exc}", file=sys.stderr)
        return 1


def describe(state: EngineState, health: dict | None = None) -> str:
    head = f"engine {state.version} @ {state.commit[:7]}"
    if health is not None:
        down_parts = [s for s, ok in health["processes"].items() if not ok] + [
            s for s, code in health["answers"].items() if code != 200]
        head += ": up" if health["up"] else f": DOWN ({', '.join(sorted(set(down_parts)))})"
    lines = [f"{head}  (auth: {state.auth}; base URL {state.base_url})"]
    if state.owner_pid:
        lines.append(f"  a run's own instance (process {state.owner_pid}); stopped when it ends")
    lines += [f"  {s:<17} {state.url(s)}  pid {state.pids.get(s)}  log {state.logs.get(s)}"
              for s in state.ports]
    lines.append(f"  PostgreSQL        {state.pg_data}")
    lines.append("  rate limits       " + ", ".join(f"{k} {v}" for k, v in
                                                    state.rate_limits.items()))
    if state.start_s is not None:
        lines.append(f"  started in        {state.start_s} s ({state.started_at})")
    return "\n".join(lines)


def _local(state: EngineState) -> dict:
    """The manifest's view plus what only matters on this machine: pids, logs, folders."""
    return {**state.manifest(), "pids": state.pids, "logs": state.logs, "home": state.home,
            "pg_data": state.pg_data}


def _err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
