"""Governance matrix speed: the enumerated matrix plus N random probes against the bundled
server, end to end (world, census, probes, checker). Target: <= 120 s on 2 cores for the
enumerated matrix plus 10,000 random probes (params/reference/matrix.yaml without the paper
option).

Prints wall time, the CPU seconds the harness and the server used (a figure the machine's
other load does not inflate), the load average while it ran, and the trace's size.

    .venv/bin/python benchmarks/bench_matrix.py [--random 10000] [--profile hardened]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timed_run import timed_run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=10_000)
    parser.add_argument("--profile", default="hardened")
    parser.add_argument("--params", default=str(REPO / "params/reference/matrix.yaml"))
    args = parser.parse_args()
    run = timed_run("matrix", args.params, [f"random_probes={args.random}",
                                            f"target.profile={args.profile}", "paper_fleets=0"])
    raw = run.events
    verdicts = Counter(json.loads(line)["verdict"] for line in raw.splitlines()
                       if b'"phase": "verdict"' in line)
    probes = run.manifest["executed"].get("probe", 0)
    print(f"matrix bench ({args.profile}, enumerated + {args.random} random): "
          f"{probes} probes, complete={run.manifest['complete']}")
    print(f"  wall {run.wall:.1f} s ({probes / run.wall:.0f} probes/s); {run.cpu_line()}")
    print(f"  {run.load_line()}")
    print(f"  verdicts: {dict(sorted(verdicts.items()))}")
    print(f"  events.jsonl {len(raw) / 1e6:.1f} MB, gzipped {len(gzip.compress(raw)) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
