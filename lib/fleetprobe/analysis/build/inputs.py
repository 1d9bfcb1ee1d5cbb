"""What a report section's output is made from, as one hash (its cache key).

A section's output is a function of: the runs it reads (the manifest and events bytes of each
run of its `EXPERIMENTS`; every run for a section that declares None), its own module, the
analysis base and the data files beside it (metrics.sql, paper_values.yaml, the catalogues),
the trace loader, the versions of the libraries that compute and draw it, and the build's
parameters (traces root, output directory, named runs). Nothing else is read, so an unchanged
hash means unchanged bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

from fleetprobe.analysis.sections import Registered
from fleetprobe.base import labels
from fleetprobe.harness import trace

ANALYSIS = Path(__file__).resolve().parent.parent
PACKAGE = "fleetprobe.analysis.sections"
# the libraries a section's bytes depend on (rendering, tables, queries)
LIBRARIES = ("duckdb", "pandas", "numpy", "matplotlib", "seaborn", "scipy", "tabulate",
             "pillow", "nbformat", "papermill", "ipykernel")
RUN_FILES = ("manifest.json", *trace.EVENTS_FILES)
# what every section reads besides its own module: the base layer, every data file beside it
# (`shared_code` globs them: a hand list once left out the promises catalogue, and a changed
# rule kept the old verdict table), and the loader the database is made with
SHARED_CODE = ("base",)
DATA_FILES = ("*.sql", "*.yaml")


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(f"{len(data)}\0".encode())  # length-prefixed: no two streams collide
        h.update(data)
    return h.hexdigest()


def file_digest(path: Path) -> str:
    return digest(path.read_bytes()) if path.is_file() else "absent"


def tree_digest(paths: Iterable[Path], root: Path) -> str:
    """The names and bytes of every source file under `paths` (files or folders)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += [p for p in path.rglob("*") if p.is_file() and _is_source(p)]
        elif path.exists():
            files.append(path)
    return digest(*(part for f in sorted(files)
                    for part in (str(f.relative_to(root)), f.read_bytes())))


def _is_source(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix in (".py", ".sql", ".yaml", ".md")


@cache
def environment() -> str:
    """Python's and the libraries' versions."""
    versions = {name: _version(name) for name in LIBRARIES}
    return json.dumps({"python": sys.version.split()[0], **versions}, sort_keys=True)


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def shared_files() -> list[Path]:
    """What every section's key hashes besides its own module: the base layer, the analysis's
    data files and the trace loader."""
    data = sorted(f for pattern in DATA_FILES for f in ANALYSIS.glob(pattern))
    loader = [Path(trace.__file__), Path(labels.__file__), trace.EVENTS_MD]
    return [*(ANALYSIS / p for p in SHARED_CODE), *data, *loader]


@cache
def shared_code() -> str:
    return tree_digest(shared_files(), ANALYSIS.parent)


def module_code(module: str) -> str:
    """A section module's source (a package: every file), found by its path under sections/
    and never imported: `find_spec` of a dotted name imports its parent package (for
    `backends.model_probes`, the backends section with pandas and matplotlib, about 1 s of a
    one-new-run build). A module with no source file there (made at run time) is never the
    same: never kept."""
    path = ANALYSIS.joinpath("sections", *module.split("."))
    found = [p for p in (path, path.with_suffix(".py")) if p.is_dir() or p.is_file()]
    if not found:
        return uuid.uuid4().hex
    return tree_digest(found[:1], ANALYSIS.parent)


class Runs:
    """The runs under a traces root: each one's experiment and a hash of its files."""

    def __init__(self, traces_root: Path) -> None:
        self.digests: dict[str, tuple[str | None, str]] = {}
        for run_dir in run_dirs(traces_root):
            manifest = run_dir / "manifest.json"
            try:
                experiment = json.loads(manifest.read_text()).get("experiment")
            except (OSError, ValueError, AttributeError):
                experiment = None
            files = digest(*(f"{name}:{file_digest(run_dir / name)}" for name in RUN_FILES))
            self.digests[run_dir.name] = (experiment, files)

    def of(self, experiments: Iterable[str] | None) -> str:
        """A hash of the runs of `experiments` (None: of every run)."""
        wanted = None if experiments is None else set(experiments)
        return digest(*(f"{name}:{files}" for name, (experiment, files) in
                        sorted(self.digests.items())
                        if wanted is None or experiment in wanted))


def run_dirs(traces_root: Path) -> list[Path]:
    """The run directories under a traces root, as `base.db.run_dirs` finds them (without
    importing DuckDB: `make report`'s currency check needs none of it)."""
    root = Path(traces_root)
    if _is_run(root):
        return [root]
    return sorted(d for d in root.iterdir() if d.is_dir() and _is_run(d)) if root.is_dir() \
        else []


def _is_run(path: Path) -> bool:
    return any((path / name).is_file() for name in RUN_FILES)


def section_key(section: Registered, runs: Runs, traces_root: Path, parameters: str) -> str:
    """The hash of everything a registered section's output is made from."""
    extra = [Path(traces_root).parent / name for name in section.files]
    return digest(section.module, environment(), shared_code(),
                  module_code(section.module), runs.of(section.experiments),
                  parameters, *(f"{p}:{file_digest(p)}" for p in extra))
