"""Where the kit keeps what it can make again (engine builds, backend environments, the
report's parsed traces): one directory per kind under $XDG_CACHE_HOME/fleetprobe (default
~/.cache/fleetprobe), or wherever the kind's own environment variable says."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root(kind: str, env_var: str) -> Path:
    """The cache directory of one kind: `env_var` if set, else <XDG cache>/fleetprobe/<kind>."""
    if os.environ.get(env_var):
        return Path(os.environ[env_var]).expanduser().resolve()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "fleetprobe" / kind
