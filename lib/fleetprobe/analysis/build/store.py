"""Section outputs kept between builds, by the hash of their inputs (`inputs.section_key`),
in the report cache (`$FLEETPROBE_REPORT_CACHE`, else ~/.cache/fleetprobe/report;
`FLEETPROBE_REPORT_CACHE=off` keeps nothing)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from fleetprobe.base import caches

if TYPE_CHECKING:  # the currency check `make report` starts imports none of the analysis
    from fleetprobe.analysis.base.section import SectionOutput

ENV_CACHE = "FLEETPROBE_REPORT_CACHE"
KEEP = 120  # section outputs (the committed report's 14 take about 10 MB)


def cache_dir() -> Path | None:
    if os.environ.get(ENV_CACHE, "").lower() == "off":
        return None
    return caches.cache_root("report", ENV_CACHE)


def _path(key: str) -> Path | None:
    root = cache_dir()
    return None if root is None else root / "sections" / f"{key}.pickle"


def load(key: str) -> SectionOutput | None:
    path = _path(key)
    if path is None or not path.is_file():
        return None
    try:
        with path.open("rb") as handle:
            output = pickle.load(handle)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry is made again
        return None
    from fleetprobe.analysis.base.section import SectionOutput

    os.utime(path)  # kept longest by `evict`
    return output if isinstance(output, SectionOutput) else None


def save(key: str, output: SectionOutput) -> None:
    path = _path(key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_bytes(pickle.dumps(output, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(partial, path)  # a reader never sees half an entry
    except OSError:  # a read-only or full disk: the build works without keeping it
        return
    evict(path.parent)


def evict(root: Path) -> None:
    """Keep the KEEP most recently used outputs."""
    entries = []
    for path in root.glob("*.pickle"):
        try:
            entries.append((path.stat().st_mtime_ns, path))
        except FileNotFoundError:
            continue
    for _, stale in sorted(entries, reverse=True)[KEEP:]:
        stale.unlink(missing_ok=True)
