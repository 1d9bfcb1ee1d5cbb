"""The one writer of the report's files: each section's files and the composed documents,
under the output directory. A file whose bytes are already there is left alone; a figure an
earlier build wrote that no section gives any more is removed (the page must not link a
stale picture). What was written is recorded for `stamp`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")


def write(out_dir: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write `files` (bytes by path under `out_dir`); return the paths whose bytes changed."""
    out_dir = Path(out_dir)
    changed = []
    for name, data in sorted(files.items()):
        path = out_dir / name
        if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, path)
        changed.append(path)
    figures = out_dir / "figures"
    if figures.is_dir():
        for path in figures.iterdir():
            if (path.suffix in FIGURE_SUFFIXES and path.is_file()
                    and f"figures/{path.name}" not in files):
                path.unlink()
    return changed
