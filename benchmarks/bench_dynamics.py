"""Dynamics speed: the reference plan (params/reference/dynamics.yaml: every change of the
timeline) against the bundled server, end to end (world, census, timeline, checker). Target:
<= 180 s on 2 cores (issue 24).

Prints wall time, the CPU seconds the harness and the server used (a figure the machine's
other load does not inflate), the load average while it ran, and where the wall time went:
each change's episode (first to last event) and the world before the first.

    .venv/bin/python benchmarks/bench_dynamics.py [--profile memclaw-2.29]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from fleetprobe import load_params, run_experiment

REPO = Path(__file__).resolve().parents[1]


def cpu_seconds() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server, once it exited
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def episodes(events: list[dict]) -> dict[str, float]:
    """Seconds from each change's first event to its last (the world: before the first)."""
    spans: dict[str, list[datetime]] = {}
    kinds = {e["change_id"]: e["change"] for e in events if e["phase"] == "change"}
    for e in events:
        if e["phase"] in ("probe", "change", "change_observed", "inflight"):
            spans.setdefault(e["change_id"], []).append(
                datetime.fromisoformat(e["ts"].replace("Z", "+00:00")))
    return {kinds.get(k, k): (max(v) - min(v)).total_seconds() for k, v in spans.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="memclaw-2.29")
    parser.add_argument("--params", default=str(REPO / "params/reference/dynamics.yaml"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        params = load_params(args.params, [f"traces_root={tmp}", f"target.profile={args.profile}",
                                           "progress=false"])
        load_before = os.getloadavg()[0]
        started, (cpu0, child0) = time.perf_counter(), cpu_seconds()
        run_dir = run_experiment("dynamics", params)
        wall = time.perf_counter() - started
        cpu1, child1 = cpu_seconds()
        load_after = os.getloadavg()[0]
        manifest = json.loads((run_dir / "manifest.json").read_text())
        events = [json.loads(line) for line in
                  (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    verdicts = Counter(e["verdict"] for e in events if e["phase"] == "verdict")
    print(f"dynamics bench ({args.profile}, {Path(args.params).name}): "
          f"{manifest['executed'].get('probe', 0)} probes, complete={manifest['complete']}")
    print(f"  wall {wall:.1f} s (target 180 s); CPU: harness {cpu1 - cpu0:.1f} s, server "
          f"{child1 - child0:.1f} s (= {(cpu1 - cpu0 + child1 - child0) / 2:.1f} s of wall on "
          "2 idle cores)")
    print(f"  load average {load_before:.1f} before, {load_after:.1f} after "
          f"({os.cpu_count()} CPUs)")
    spans = episodes(events)
    print(f"  episodes {sum(spans.values()):.1f} s: " + ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(spans.items(), key=lambda kv: -kv[1])))
    print(f"  verdicts: {dict(sorted(verdicts.items()))}")


if __name__ == "__main__":
    main()
