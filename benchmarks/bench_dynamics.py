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
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timed_run import timed_run  # noqa: E402


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
    run = timed_run("dynamics", args.params, [f"target.profile={args.profile}"])
    events = [json.loads(line) for line in run.events.splitlines() if line.strip()]
    verdicts = Counter(e["verdict"] for e in events if e["phase"] == "verdict")
    print(f"dynamics bench ({args.profile}, {Path(args.params).name}): "
          f"{run.manifest['executed'].get('probe', 0)} probes, "
          f"complete={run.manifest['complete']}")
    print(f"  wall {run.wall:.1f} s (target 180 s); {run.cpu_line()}")
    print(f"  {run.load_line()}")
    spans = episodes(events)
    print(f"  episodes {sum(spans.values()):.1f} s: " + ", ".join(
        f"{k} {v:.1f}" for k, v in sorted(spans.items(), key=lambda kv: -kv[1])))
    print(f"  verdicts: {dict(sorted(verdicts.items()))}")


if __name__ == "__main__":
    main()
