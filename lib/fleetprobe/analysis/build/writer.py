"""The one writer of the report's files: each section's files and the composed documents,
under the output directory. A file whose bytes are already there is left alone; a file an
earlier build wrote under the folders only the build writes (figures, tables and their parts,
per-target pages) that no section gives any more is removed: the page must not link a stale
picture, and a table that shrank below its split must not keep its old parts beside it.
What was written is recorded for `stamp`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# nothing else writes under these: what no section gives any more goes (under figures/
# only the figures, so a note a user keeps there stays)
BUILD_FOLDERS: dict[str, tuple[str, ...] | None] = {
    "figures": (".png", ".pdf", ".svg"), "tables": None, "matrix": None}


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
    for folder, suffixes in BUILD_FOLDERS.items():
        _remove_stale(out_dir, folder, files, suffixes)
    return changed


def _remove_stale(out_dir: Path, folder: str, files: Mapping[str, bytes],
                  suffixes: tuple[str, ...] | None) -> None:
    root = out_dir / folder
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*"), reverse=True):  # files before their folders
        name = path.relative_to(out_dir).as_posix()
        if (path.is_file() and name not in files
                and (suffixes is None or path.suffix in suffixes)):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
