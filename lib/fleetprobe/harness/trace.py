"""Run directories: `events.jsonl` appended as it happens, `manifest.json` kept current.

The field lists of every experiment phase are read from `EVENTS.md` (the contract with the
analysis), so an event carrying an unknown field fails loudly and an absent field is written
as null, exactly as the contract says. Nothing that contains a known key is ever written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the analysis reads EVENTS.md through this module: no HTTP client for it
    from fleetprobe.client import Result

EVENTS_MD = Path(__file__).parents[1] / "EVENTS.md"
COMMON_FIELDS = (
    "run_id", "experiment", "seq", "ts", "phase", "op", "status", "latency_ms", "attempts",
    "error", "not_applicable",
)
# Judgements an event may carry; an answer "not supported by this backend" nulls them all, so
# the probe counts as neither outcome (not applicable, with the reason in `not_applicable`).
JUDGEMENT_FIELDS = (
    "returned", "leak", "miss", "visible", "detected", "flipped", "admitted", "both_admitted",
    "stale", "complete", "accurate", "depth_faithful",
)
MANIFEST_PACKAGES = (
    "fleetprobe", "httpx", "tenacity", "pydantic", "pyyaml", "fastapi", "uvicorn", "duckdb",
    "pandas", "scipy", "papermill",
    # the optional `backends` extra (null when not installed)
    "langgraph", "mem0ai", "qdrant-client", "crewai", "lancedb",
    "graphiti-core", "kuzu",
)
_BY_ID = re.compile(r"/(memories|agents|entities)/(?!bulk\b|redistribute\b|upsert\b)[^/?\s]+")


def _op_shape(op: str) -> str:
    """`GET /api/v1/memories/{id}` for any id, so one request kind is one manifest entry."""
    return _BY_ID.sub(lambda m: f"/{m.group(1)}/{{id}}", op)


class SecretLeakError(RuntimeError):
    """Raised instead of writing a record that contains a known key."""


@cache
def phase_fields() -> dict[str, dict[str, tuple[str, ...]]]:
    """`{experiment: {phase: (field, ...)}}` parsed from the tables in EVENTS.md."""
    schema: dict[str, dict[str, tuple[str, ...]]] = {}
    experiment = None
    for line in EVENTS_MD.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (\w+)\s*$", line)
        if heading:
            experiment = heading.group(1)
            continue
        row = re.match(r"^\|\s*`(\w+)`\s*\|[^|]*\|(.*)\|\s*$", line)
        if experiment is None or row is None:
            continue
        phase, fields_col = row.group(1), row.group(2)
        phases = schema.setdefault(experiment, {})
        same_as = re.match(r"\s*same fields as `(\w+)`", fields_col)
        if same_as:
            phases[phase] = phases[same_as.group(1)]
            continue
        names = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", fields_col))
        phases[phase] = tuple(names)
    return schema


EVENTS_FILES = ("events.jsonl", "events.jsonl.gz")  # as written; as committed (gzip)


def events_file(run_dir: str | Path) -> Path:
    """A run's event log: `events.jsonl` while written, `events.jsonl.gz` once committed."""
    run_dir = Path(run_dir)
    for name in EVENTS_FILES:
        if (run_dir / name).is_file():
            return run_dir / name
    return run_dir / EVENTS_FILES[0]


def read_event_lines(run_dir: str | Path) -> list[str]:
    """The lines of a run's event log, in either form."""
    path = events_file(run_dir)
    if not path.is_file():
        return []
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    return path.read_text(encoding="utf-8").splitlines()


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(ts: datetime) -> str:
    return ts.isoformat(timespec="microseconds").replace("+00:00", "Z")


def make_run_id(experiment: str, seed: int, started: datetime) -> str:
    return f"{started.strftime('%Y%m%dT%H%M%SZ')}-{experiment}-seed{seed}"


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in MANIFEST_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


@dataclass
class Manifest:
    """manifest.json, field for field as EVENTS.md lists it."""

    run_id: str
    experiment: str
    params: dict[str, Any]
    seed: int
    nonce: str
    target: dict[str, Any] = field(default_factory=dict)
    packages: dict[str, str | None] = field(default_factory=package_versions)
    git_commit: str | None = field(default_factory=git_commit)
    planned: dict[str, int] = field(default_factory=dict)
    executed: dict[str, int] = field(default_factory=dict)
    started_at: str = field(default_factory=lambda: iso(utc_now()))
    ended_at: str | None = None
    complete: bool = False
    incomplete_reason: str | None = "running"
    skipped: list[dict[str, str]] = field(default_factory=list)
    # what the run planned and could not do (principals, rows, probes it never sent): any
    # entry makes the finished run incomplete, with these reasons
    shortfalls: list[str] = field(default_factory=list)
    # op -> {"reason", "count"}: requests the target answered "not supported by this backend"
    not_applicable: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Trace:
    """One run directory. Thread-safe append; every event is flushed to disk as written."""

    def __init__(
        self,
        root: str | Path,
        experiment: str,
        seed: int,
        nonce: str,
        params: dict[str, Any],
        *,
        secrets: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        started = utc_now()
        self.experiment = experiment
        self.run_id = make_run_id(experiment, seed, started)
        self.dir = _fresh_dir(Path(root), self.run_id)
        self.run_id = self.dir.name
        self.events_path = self.dir / "events.jsonl"
        self.manifest_path = self.dir / "manifest.json"
        self.manifest = Manifest(self.run_id, experiment, params, seed, nonce,
                                 started_at=iso(started))
        self._schema = phase_fields().get(experiment)
        if self._schema is None:
            raise ValueError(f"EVENTS.md has no section for experiment {experiment!r}")
        self._secrets: set[str] = set(secrets)
        self._seq = 0
        self._executed: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._events = self.events_path.open("a", encoding="utf-8")
        self.write_manifest()

    # -- secrets -------------------------------------------------------------------------

    def add_secrets(self, secrets: frozenset[str] | set[str]) -> None:
        self._secrets.update(s for s in secrets if s)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<redacted>")
        return text

    def _guard(self, text: str, what: str) -> str:
        if any(secret in text for secret in self._secrets):
            raise SecretLeakError(f"refused to write {what}: it contains an API key")
        return text

    # -- events --------------------------------------------------------------------------

    def event(self, phase: str, result: Result | None = None, *, na: str | None = None,
              **fields: Any) -> dict[str, Any]:
        """Append one event. `result` fills op/status/latency_ms/attempts/error; a judgement
        (no request) passes none and gets op/status/latency null and attempts 0. `na`: a
        probe not sent because what it needs was answered "not supported by this backend"
        earlier (its reason): not applicable like the answer itself, counted under
        `(not sent) <phase>` in the manifest."""
        allowed = self._schema.get(phase)
        if allowed is None:
            raise ValueError(f"{self.experiment}: phase {phase!r} is not in EVENTS.md")
        unknown = set(fields) - set(allowed)
        if unknown:
            raise ValueError(
                f"{self.experiment}/{phase}: fields {sorted(unknown)} are not in EVENTS.md"
            )
        from fleetprobe.client import not_supported  # a recorded run has the client loaded

        unsupported = not_supported(result) if result is not None else None
        shape = _op_shape(result.op) if result is not None else None
        if unsupported is None and na is not None:
            unsupported, shape = na, f"(not sent) {phase}: {na.split(':')[0]}"
        if unsupported is not None:
            fields = {**fields, **dict.fromkeys(
                (f for f in JUDGEMENT_FIELDS if f in allowed), None)}
        with self._lock:
            if unsupported is not None:
                entry = self.manifest.not_applicable.setdefault(
                    str(shape), {"reason": unsupported, "count": 0})
                entry["count"] += 1
            record: dict[str, Any] = {
                "run_id": self.run_id,
                "experiment": self.experiment,
                "seq": self._seq,
                "ts": iso(utc_now()),
                "phase": phase,
                "op": result.op if result else None,
                "status": result.status if result else None,
                "latency_ms": _round_ms(result.latency_ms if result else None),
                "attempts": result.attempts if result else 0,
                "error": result.error if result else None,
                "not_applicable": unsupported,
            }
            record.update({name: fields.get(name) for name in allowed})
            line = self._guard(json.dumps(record, default=str), f"event {phase}")
            self._events.write(line + "\n")
            self._events.flush()
            self._seq += 1
            self._executed[phase] += 1
        return record

    def read_events(self, phase: str | None = None) -> list[dict[str, Any]]:
        """Events as recorded on disk (checkers judge these, never in-memory state)."""
        with self._lock:
            self._events.flush()
        with self.events_path.open(encoding="utf-8") as fh:
            events = [json.loads(line) for line in fh if line.strip()]
        return [e for e in events if phase is None or e["phase"] == phase]

    # -- manifest ------------------------------------------------------------------------

    def skip(self, probe: str, reason: str) -> None:
        self.manifest.skipped.append({"probe": probe, "reason": reason})
        self.write_manifest()

    def shortfall(self, reason: str) -> None:
        """Something the run planned and could not do: the run will finish incomplete."""
        self.manifest.shortfalls.append(self.redact(reason))
        self.write_manifest()

    def write_manifest(self) -> None:
        with self._lock:
            self.manifest.executed = dict(self._executed)
            text = json.dumps(self.manifest.as_dict(), indent=2, default=str)
            text = self._guard(text, "manifest")
            tmp = self.manifest_path.with_suffix(".json.tmp")
            tmp.write_text(text + "\n", encoding="utf-8")
            os.replace(tmp, self.manifest_path)

    def finish(self, complete: bool, reason: str | None = None) -> None:
        """Final manifest: complete, or incomplete with the reason; closes the event log. A
        run with shortfalls is incomplete even when it ran to its end."""
        if complete and self.manifest.shortfalls:
            complete, reason = False, "; ".join(self.manifest.shortfalls)
        self.manifest.ended_at = iso(utc_now())
        self.manifest.complete = complete
        self.manifest.incomplete_reason = None if complete else self.redact(reason or "unknown")
        try:
            self.write_manifest()
        finally:
            with self._lock:
                self._events.close()


def _round_ms(latency_ms: float | None) -> float | None:
    return None if latency_ms is None else round(latency_ms, 3)


# Runs that write to different traces roots but end up side by side (`fleetprobe reproduce`
# gives every run a work directory of its own) reserve their names in one registry directory.
ENV_RUN_ID_REGISTRY = "FLEETPROBE_RUN_ID_REGISTRY"


def _fresh_dir(root: Path, run_id: str) -> Path:
    """Create `root/run_id`, suffixing `-2`, `-3`... if two runs start in the same second."""
    root.mkdir(parents=True, exist_ok=True)
    registry = os.environ.get(ENV_RUN_ID_REGISTRY)
    if registry:
        Path(registry).mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        name = run_id if n == 1 else f"{run_id}-{n}"
        try:
            if registry:
                (Path(registry) / name).mkdir()
            candidate = root / name
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a run directory under {root}")
