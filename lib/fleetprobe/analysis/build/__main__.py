"""`make report`: execute the report notebook (its build writes every file), unless the
executed notebook and every file the last build wrote are current (`stamp`): then no kernel
is started at all.

    python -m fleetprobe.analysis.build notebooks/report.ipynb reports/report.ipynb \
        -p traces_root data/traces -p out_dir reports
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetprobe.analysis.build import stamp


def run(source: Path, output: Path, parameters: dict[str, Any]) -> int | None:
    """The notebook driver's exit status, or None when everything was current."""
    out_dir = Path(parameters.get("out_dir", "reports"))
    # the page lists the executed notebooks beside it: a new one is a change
    books = sorted(p.name for p in out_dir.glob("*.ipynb") if p != output)
    key = stamp.notebook_key(source, {**parameters, "notebooks": books})
    if output.is_file() and stamp.current(out_dir, key):
        return None
    from fleetprobe.base import notebooks

    status = notebooks.main([str(source), str(output), *(
        part for name, value in parameters.items() for part in ("-p", name, str(value)))])
    if status == 0 and output.parent == out_dir:
        stamp.record(out_dir, key, output)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fleetprobe.analysis.build",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                        metavar=("NAME", "VALUE"))
    args = parser.parse_args(argv)
    parameters = dict(args.parameter)
    status = run(args.source, args.output, parameters)
    if status is None:
        print(f"{args.output} and {parameters.get('out_dir', 'reports')}/ are current")
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
