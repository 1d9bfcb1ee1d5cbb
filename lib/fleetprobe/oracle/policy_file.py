"""The governance policy as a data file (`fleetprobe/oracle/policy.yaml`, docs/judge.md): its
format, its validation and its loading into the tables `fleetprobe.oracle.policy` looks up.

A user copies the default file, edits it and passes it to `fleetprobe judge RUN --policy
FILE`; a file that is not a complete, well-typed policy is refused with the key that is
wrong and what was expected there (`PolicyFileError`). Nothing here imports the kit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DEFAULT_FILE = Path(__file__).with_name("policy.yaml")

Decision = Literal["allow", "may", "deny"]
PathKind = Literal["read", "reveal", "change", "write", "redistribute", "identity"]
VISIBILITIES = ("scope_agent", "scope_team", "scope_org")
AGENT_RELATIONS = ("own", "same_fleet", "other_fleet", "null_fleet", "homeless")
FLEET_RELATIONS = ("home", "none", "other")
PAPER_SCOPES = ("agent", "fleet")
PAPER_RELATIONS = ("same_agent", "same_fleet", "cross_fleet")
# a threshold above every trust level: no agent suffices (the tenant credential still does)
NOBODY = 4


class PolicyFileError(ValueError):
    """A policy file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class PathRule:
    """What a probe path promises (the `paths:` entries of the policy file)."""

    kind: PathKind
    discovery: bool = False  # list/search-like: `scope_agent` rows for the tenant key are MAY
    hides_stale: bool = False  # MemClaw search drops outdated/conflicted rows by default
    must_return: bool = False
    strict_fleet: bool = False  # list `fleet_id` is strict equality: fleet-less rows are out
    # a filter naming another agent may be refused outright (MemClaw 2.29 answers 403); only
    # a filter naming the caller itself must return its rows
    own_filter_only: bool = False


@dataclass(frozen=True)
class PolicyTables:
    """One policy: every table of the file, typed and complete."""

    name: str
    source: str
    read: Mapping[str, Mapping[str, int | None]]
    change: Mapping[str, int]
    own_outside_write_scope: int
    write: Mapping[str, int]
    redistribute_any_target: int
    redistribute_target_min_trust: int
    deleted_agent: Decision
    deleted_tenant: Decision
    deleted_own_reveal: Decision
    unregistered_trust: int
    stale_statuses: tuple[str, ...]
    paper: Mapping[str, tuple[str, ...]]
    paths: Mapping[str, PathRule]
    timeline_paths: Mapping[str, PathRule]

    @property
    def rules(self) -> dict[str, PathRule]:
        return {**self.paths, **self.timeline_paths}


Trust = int
_TRUST = Field(ge=0, le=NOBODY)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Path(_Strict):
    kind: PathKind
    discovery: bool = False
    hides_stale: bool = False
    must_return: bool = False
    strict_fleet: bool = False
    own_filter_only: bool = False


class _Redistribute(_Strict):
    any_target: Trust = _TRUST
    target_min_trust: Trust = _TRUST


class _Deleted(_Strict):
    agent: Decision
    tenant: Decision
    own_reveal: Decision


class _File(_Strict):
    name: str
    description: str = ""
    read: dict[str, dict[str, Trust | None]]
    change: dict[str, Trust]
    own_outside_write_scope: Trust = _TRUST
    write: dict[str, Trust]
    redistribute: _Redistribute
    deleted: _Deleted
    unregistered_trust: Trust = Field(ge=0, le=3)
    stale_statuses: list[str]
    paper: dict[str, list[str]]
    paths: dict[str, _Path]
    timeline_paths: dict[str, _Path]


def _exact_keys(where: str, got: Mapping[str, Any], wanted: tuple[str, ...] | set[str],
                problems: list[str]) -> None:
    missing = [k for k in wanted if k not in got]
    unknown = [k for k in got if k not in wanted]
    if missing:
        problems.append(f"{where}: missing {', '.join(missing)}")
    if unknown:
        problems.append(f"{where}: unknown key {', '.join(unknown)} (expected one of "
                        f"{', '.join(sorted(wanted))})")


def _check_trusts(where: str, values: Mapping[str, Any], problems: list[str]) -> None:
    for key, value in values.items():
        if value is not None and not 0 <= value <= NOBODY:
            problems.append(f"{where}.{key}: {value} is not a trust level 0..3 "
                            f"(or {NOBODY}: no agent)")


def _semantic_problems(f: _File, known_paths: set[str] | None) -> list[str]:
    problems: list[str] = []
    _exact_keys("read", f.read, AGENT_RELATIONS, problems)
    for rel, row in f.read.items():
        if rel in AGENT_RELATIONS:
            _exact_keys(f"read.{rel}", row, VISIBILITIES, problems)
            _check_trusts(f"read.{rel}", row, problems)
    _exact_keys("change", f.change, AGENT_RELATIONS, problems)
    _check_trusts("change", f.change, problems)
    _exact_keys("write", f.write, FLEET_RELATIONS, problems)
    _check_trusts("write", f.write, problems)
    _exact_keys("paper", f.paper, PAPER_SCOPES, problems)
    for scope, relations in f.paper.items():
        bad = [r for r in relations if r not in PAPER_RELATIONS]
        if bad:
            problems.append(f"paper.{scope}: unknown relation {', '.join(bad)} (expected "
                            f"some of {', '.join(PAPER_RELATIONS)})")
    if known_paths is not None:
        _exact_keys("paths", f.paths, known_paths, problems)
    return problems


def parse(raw: Any, source: str, known_paths: set[str] | None = None) -> PolicyTables:
    """Policy tables from a file's parsed YAML; `known_paths`: the path names the harness
    probes (a policy must say what each one promises, and name no other)."""
    if not isinstance(raw, dict):
        raise PolicyFileError(f"policy file {source} must hold a mapping of the policy's "
                              f"tables, not {type(raw).__name__}")
    try:
        f = _File.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
                    + (f" (got {err['input']!r})" if err["type"] != "missing" else "")
                    for err in exc.errors()]
        raise PolicyFileError(f"policy file {source} is invalid: " + "; ".join(problems)
                              + f" (compare with {DEFAULT_FILE})") from exc
    problems = _semantic_problems(f, known_paths)
    if problems:
        raise PolicyFileError(f"policy file {source} is invalid: " + "; ".join(problems)
                              + f" (compare with {DEFAULT_FILE})")

    def rule(p: _Path) -> PathRule:
        return PathRule(p.kind, p.discovery, p.hides_stale, p.must_return, p.strict_fleet,
                        p.own_filter_only)

    return PolicyTables(
        name=f.name, source=source,
        read={r: dict(f.read[r]) for r in AGENT_RELATIONS},
        change={r: f.change[r] for r in AGENT_RELATIONS},
        own_outside_write_scope=f.own_outside_write_scope,
        write={r: f.write[r] for r in FLEET_RELATIONS},
        redistribute_any_target=f.redistribute.any_target,
        redistribute_target_min_trust=f.redistribute.target_min_trust,
        deleted_agent=f.deleted.agent, deleted_tenant=f.deleted.tenant,
        deleted_own_reveal=f.deleted.own_reveal,
        unregistered_trust=f.unregistered_trust,
        stale_statuses=tuple(f.stale_statuses),
        paper={s: tuple(f.paper[s]) for s in PAPER_SCOPES},
        paths={k: rule(p) for k, p in f.paths.items()},
        timeline_paths={k: rule(p) for k, p in f.timeline_paths.items()})


def load(path: str | Path, known_paths: set[str] | None = None) -> PolicyTables:
    """Read and validate a policy file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyFileError(f"cannot read policy file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"policy file {path} is not valid YAML: {exc}") from exc
    return parse(raw, str(path), known_paths)
