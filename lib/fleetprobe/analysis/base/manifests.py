"""The runs' manifests as the analysis reads them: the fields it keys on (`read_manifest`,
a missing or unreadable manifest giving nulls) and the `manifests` table they fill."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from fleetprobe.base.labels import default_label

RUN_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "experiment": "VARCHAR",
    "profile": "VARCHAR",
    "target_kind": "VARCHAR",
    "server_version": "VARCHAR",
    "base_url": "VARCHAR",
    "latency_simulated": "BOOLEAN",
    "seed": "BIGINT",
    "complete": "BOOLEAN",
    "incomplete_reason": "VARCHAR",
    "started_at": "VARCHAR",
    "ended_at": "VARCHAR",
    "params": "VARCHAR",
    "planned": "VARCHAR",
    "executed": "VARCHAR",
    "has_manifest": "BOOLEAN",
    "engine_commit": "VARCHAR",
    # the kit's own commit the run was made from (a spread over seeds names it per run)
    "kit_commit": "VARCHAR",
    "packages": "VARCHAR",
    # JSON lists: what the run skipped ({probe, reason}) and could not do (reasons)
    "skipped": "VARCHAR",
    "shortfalls": "VARCHAR",
}


def load_runs(con: duckdb.DuckDBPyConnection, manifests: list[dict]) -> None:
    # imported here: `make report` starts a process that only checks the database cache,
    # and pandas is two thirds of its start-up
    import pandas as pd

    frame = pd.DataFrame(manifests, columns=list(RUN_COLUMNS))
    columns = ", ".join(f'"{name}" {kind}' for name, kind in RUN_COLUMNS.items())
    con.execute(f"CREATE TABLE manifests ({columns})")
    if not frame.empty:
        con.register("manifest_frame", frame)
        con.execute("INSERT INTO manifests SELECT * FROM manifest_frame")
        con.unregister("manifest_frame")


def read_manifest(run_dir: Path) -> dict:
    """The manifest fields the analysis keys on; a missing or unreadable manifest gives nulls."""
    path = Path(run_dir) / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict):
        return {"run_id": Path(run_dir).name, "complete": False, "has_manifest": False,
                "incomplete_reason": "manifest.json missing or unreadable"}
    target = manifest.get("target") or {}
    return {
        "run_id": manifest.get("run_id") or Path(run_dir).name,
        "experiment": manifest.get("experiment"),
        # the run's target label: every table keeps labels apart and the verdict judges each
        "profile": run_label(target),
        "target_kind": target.get("kind"),
        "server_version": _as_text(target.get("server_version")),
        "base_url": target.get("base_url"),
        "latency_simulated": target.get("latency_simulated"),
        "seed": manifest.get("seed"),
        "complete": bool(manifest.get("complete")),
        "incomplete_reason": manifest.get("incomplete_reason"),
        "started_at": manifest.get("started_at"),
        "ended_at": manifest.get("ended_at"),
        "params": json.dumps(manifest.get("params") or {}, sort_keys=True),
        "planned": json.dumps(manifest.get("planned") or {}, sort_keys=True),
        "executed": json.dumps(manifest.get("executed") or {}, sort_keys=True),
        "has_manifest": True,
        "engine_commit": (target.get("engine") or {}).get("commit"),
        "kit_commit": manifest.get("git_commit"),
        "packages": json.dumps(manifest.get("packages") or {}, sort_keys=True),
        "skipped": json.dumps(manifest.get("skipped") or []),
        "shortfalls": json.dumps(manifest.get("shortfalls") or []),
    }


def run_label(target: dict) -> str | None:
    """The manifest's `target.label`; for runs recorded before labels existed, the label the
    harness would give them (bundled server: its profile; live: version and host)."""
    if target.get("label"):
        return str(target["label"])
    if not target:
        return None
    return default_label(target.get("kind"), target.get("server_profile"),
                         _as_text(target.get("server_version")), target.get("base_url"),
                         target.get("embedder"))


def _as_text(value: object) -> str | None:
    return None if value is None else str(value)
