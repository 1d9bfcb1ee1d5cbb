"""Where the kit keeps what it can make again (engine builds, backend environments, the
report's parsed traces): one directory per kind under $XDG_CACHE_HOME/fleetprobe (default
~/.cache/fleetprobe), or wherever the kind's own environment variable says."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root(kind: str, env_var: str) -> Path:
    """The cache directory of one kind: `env_var` if set, else <XDG cache>/fleetprobe/<kind>."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var]).expanduser().resolve()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "fleetprobe" / kind


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """One maker at a time of a cache entry, across processes (an advisory lock on `path`,
    released when the block ends or the process dies): the others wait, then find it made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
