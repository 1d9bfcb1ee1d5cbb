"""What the backends modules share: the section's key, which runs are a backend's, the
matrix probes they read, and how a figure or a cell is written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from fleetprobe.analysis.base.figures import png_bytes  # noqa: E402
from fleetprobe.analysis.base.results import Results  # noqa: E402

KEY, TITLE = "backends", "Backends"


EXPERIMENTS = ("leakage", "contradiction", "provenance", "propagation", "matrix")


BACKEND_PREFIX = "backend-"


NO_RUNS = ("no backend runs yet: run `make backends` (or `python -m fleetprobe run <experiment> "
           "--set target.kind=backend --set target.backend=<langgraph|mem0|crewai>`)")


def backend_of(profile: str | None) -> str | None:
    return profile[len(BACKEND_PREFIX):] if profile and profile.startswith(BACKEND_PREFIX) \
        else None


NO_MATRIX = ("no matrix runs of a backend yet: run `make backends` (or `python -m fleetprobe run "
             "matrix --params params/smoke/matrix.yaml --set target.kind=backend --set "
             "target.backend=<langgraph|mem0|crewai>`)")


STORE_PACKAGE = {"SqliteStore": "langgraph-checkpoint-sqlite",
                 "PostgresStore": "langgraph-checkpoint-postgres"}
BACKEND_PACKAGE = {"langgraph": "langgraph", "mem0": "mem0ai", "crewai": "crewai"}
BACKEND_PACKAGE["graphiti"] = "graphiti-core"


def target_info(traces_root: Path | None, run_id: str) -> dict[str, str]:
    """backend, deployment, store and the deciding package's version of a backend run, from
    its manifest (`backend-<name>` runs from before deployments are `idiomatic`)."""
    try:
        manifest = json.loads((Path(traces_root or ".") / run_id / "manifest.json").read_text())
    except (OSError, ValueError):
        manifest = {}
    target = manifest.get("target") or {}
    backend = str(target.get("backend") or "?")
    store = str(target.get("backend_store") or "?")
    store_short = re.sub(r"^Memory\((\w[\w ]*?)[,)].*$", r"\1", store)
    packages = (target.get("backend_env") or {}).get("packages") or {}
    package = STORE_PACKAGE.get(store, BACKEND_PACKAGE.get(backend, backend))
    version = packages.get(package) or (target.get("backend_version")
                                        if package == BACKEND_PACKAGE.get(backend) else None)
    return {"backend": backend, "deployment": target.get("backend_deployment") or "idiomatic",
            "store": store_short, "version": f"{package} {version or '?'}"}


def _backend_matrix_runs(results: Results) -> pd.DataFrame:
    canonical = results.canonical[results.canonical.experiment == "matrix"]
    return canonical[canonical.profile.map(backend_of).notna()]


def _save_png(fig: Figure, out_dir: Path, name: str, dpi: float) -> dict[Path, bytes]:
    """{out_dir/<name>.png: its bytes}. PNG only: the page and the notebook show these
    figures, nothing reads a PDF of them."""
    data = png_bytes(fig, dpi)
    plt.close(fig)
    return {out_dir / f"{name}.png": data}


def _matrix_probes(results: Results, run_ids: list[str]) -> pd.DataFrame:
    """Every judged matrix probe of these runs with what attribution needs (metrics.sql's
    backend_matrix_attribution), read for these runs only: the bundled profiles' matrix runs
    are three quarters of the view's rows."""
    if not run_ids:
        return pd.DataFrame()
    return results.con.execute(
        "SELECT * FROM backend_matrix_attribution WHERE list_contains(?::VARCHAR[], run_id) "
        "ORDER BY run_id, probe_id", [run_ids]).df()


def _why(reasons: dict[str, str]) -> str:
    """`langgraph, mem0: <reason>; crewai: <other>`, without the envelope's backend prefix."""
    grouped: dict[str, list[str]] = {}
    for backend, reason in reasons.items():
        short = re.sub(r"not supported by this backend \([a-z0-9]+\): ", "", reason)
        grouped.setdefault(short, []).append(backend)
    return "; ".join(f"{', '.join(bs)}: {r}" for r, bs in grouped.items())


def _cell(cell: dict[str, Any] | None) -> str:
    """`gaps/judged gaps, k misses; n/a (k)` of one run and path (a backend_matrix_paths
    row), `-` where the run has no such row."""
    if cell is None:
        return "-"
    judged, gaps = int(cell["judged"]), int(cell["gaps"])
    misses, na = int(cell["misses"]), int(cell["not_applicable"])
    parts = [f"{gaps}/{judged} gaps" + (f", {misses} misses" if misses else "")] if judged else []
    if na:
        parts.append(f"n/a ({na})")
    return "; ".join(parts) or "-"


def _relative(files: dict[Path, bytes], out_dir: Path) -> dict[str, bytes]:
    return {path.relative_to(out_dir).as_posix(): data for path, data in files.items()}


def shown(url: str) -> str:
    """An address as the report page shows it: without the scheme (the page fetches and links
    nothing outside itself; the catalogues keep the full URL)."""
    return url.removeprefix("https://").removeprefix("http://")
