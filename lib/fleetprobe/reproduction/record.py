"""A reproduction's directory and its record (`reproduction.json`): where reproductions live,
how one is created, and which one an invocation resumes."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetprobe.drive.batch import Plan
from fleetprobe.harness.trace import git_commit

REPRODUCTIONS = Path("data/reproductions")
CANONICAL = Path("data/traces")
INDEX = "canonical.json"
RECORD = "reproduction.json"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Written whole or not at all: a reader never sees half a record."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_record(directory: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((directory / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def find_resumable(root: Path, plan: str, fast: bool) -> Path | None:
    """The latest reproduction of this plan and mode, if it is not complete."""
    mine = []
    for directory in sorted(root.glob("*")) if root.is_dir() else []:
        record = read_record(directory)
        if record and record.get("plan") == plan and bool(record.get("fast")) == fast:
            mine.append((directory, record))
    if mine and not mine[-1][1].get("complete"):
        return mine[-1][0]
    return None


def new_reproduction(root: Path, plan: Plan, fast: bool, jobs: int) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{plan.name}{'-fast' if fast else ''}"
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100):
        directory = root / (base if n == 1 else f"{base}-{n}")
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        write_json(directory / RECORD, {
            "plan": plan.name, "plan_file": str(plan.path), "fast": fast, "jobs": jobs,
            "created_at": now(), "git_commit": git_commit(), "complete": False,
            "shared_servers": fast, "runs": {}, "report": None})
        return directory
    raise RuntimeError(f"could not create a reproduction directory under {root}")
