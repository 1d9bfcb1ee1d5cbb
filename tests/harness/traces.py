"""Reading a run directory back in tests: its events, its manifest, and the key pattern
no produced file may contain."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fleetprobe.harness.trace import read_event_lines

REPO = Path(__file__).resolve().parents[2]
KEY_LIKE = re.compile(r"mc_[A-Za-z0-9_-]{20,}")  # the server's keys: mc_ + 43 url-safe chars


def events(run_dir: Path, phase: str | None = None, **where: Any) -> list[dict[str, Any]]:
    """Events of one phase (all when None) whose fields equal `where`."""
    lines = read_event_lines(run_dir)  # events.jsonl or the committed events.jsonl.gz
    return [e for e in map(json.loads, lines)
            if (phase is None or e["phase"] == phase)
            and all(e.get(k) == v for k, v in where.items())]


def manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())
