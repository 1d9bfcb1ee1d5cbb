"""Which engine source a user gave: a checkout of caura-ai/caura or a `git archive` tarball of
it, its commit and its version, and the source tree the services run from.

A checkout is run in place (Python writes only its bytecode caches there, which the engine's
.gitignore ignores); an archive is extracted once into the cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleetprobe.engine.errors import EngineError

ENV_SRC = "FLEETPROBE_ENGINE_SRC"
SERVICES = ("core-storage-api", "core-api")  # in start order: core-api calls storage
_COMMIT_IN_NAME = re.compile(r"-([0-9a-f]{7,40})\.tar\.gz$")


@dataclass(frozen=True)
class EngineSource:
    path: Path  # what the user gave
    commit: str  # full hash where known, else the short one in the archive's name
    version: str  # core-api's pyproject version (what the Dockerfile stamps as VERSION)
    is_archive: bool
    committed_at: str  # the commit's time, UTC ISO 8601: what a lock-less build resolves as of
    dirty: bool = False  # a checkout with uncommitted changes

    @property
    def short_commit(self) -> str:
        return self.commit[:7]


def resolve_source(path: str | os.PathLike | None) -> Path:
    """The path given, else FLEETPROBE_ENGINE_SRC; a clear error when neither names one."""
    given = path or os.environ.get(ENV_SRC)
    if not given:
        raise EngineError(
            f"no engine source: pass --src PATH (or set target.engine_src, or {ENV_SRC}) to a "
            "checkout of https://github.com/caura-ai/caura at b65ecbe (v2.29.0) or its "
            "source archive (docs/engine.md)")
    src = Path(given).expanduser().resolve()
    if not src.exists():
        raise EngineError(f"engine source {src} does not exist ({ENV_SRC} or --src)")
    return src


def inspect_source(src: Path) -> EngineSource:
    if src.is_file():
        if not src.name.endswith((".tar.gz", ".tgz")):
            raise EngineError(f"{src}: expected a .tar.gz source archive or a directory")
        return EngineSource(src, _archive_commit(src), _archive_version(src), is_archive=True,
                            committed_at=_archive_time(src))
    missing = [s for s in SERVICES if not (src / s / "pyproject.toml").is_file()]
    if missing:
        raise EngineError(f"{src} is not a MemClaw engine checkout: no {missing[0]}/"
                          "pyproject.toml (clone caura-ai/caura, docs/engine.md)")
    commit, dirty, committed_at = _git_commit(src)
    return EngineSource(src, commit, _version(src / "core-api" / "pyproject.toml"),
                        is_archive=False, committed_at=committed_at, dirty=dirty)


def _archive_commit(archive: Path) -> str:
    """`git archive` stores the commit in the tar's global pax header (what
    `git get-tar-commit-id` reads); else the hash in the file's name."""
    with tarfile.open(archive, "r:gz") as tar:
        comment = (tar.pax_headers or {}).get("comment", "").strip()
        if re.fullmatch(r"[0-9a-f]{40}", comment):
            return comment
    match = _COMMIT_IN_NAME.search(archive.name)
    if match:
        return match.group(1)
    raise EngineError(f"{archive}: no commit id in its header or name; make it with "
                      "`git archive --format=tar.gz` or pass a checkout")


def _archive_time(archive: Path) -> str:
    """`git archive` stamps every entry with the commit's time."""
    with tarfile.open(archive, "r:gz") as tar:
        first = tar.next()
        if first is None:
            raise EngineError(f"{archive} is empty: not a MemClaw engine source")
        return _iso(first.mtime)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _archive_version(archive: Path) -> str:
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.name.count("/") == 2 and member.name.endswith("core-api/pyproject.toml"):
                data = tar.extractfile(member)
                if data is not None:
                    return tomllib.load(data)["project"]["version"]
    raise EngineError(f"{archive} has no core-api/pyproject.toml: not a MemClaw engine source")


def _version(pyproject: Path) -> str:
    with pyproject.open("rb") as fh:
        return tomllib.load(fh)["project"]["version"]


def _git_commit(src: Path) -> tuple[str, bool, str]:
    git = shutil.which("git")
    if git is None or not (src / ".git").exists():
        raise EngineError(f"{src} is not a git checkout (no .git): clone caura-ai/caura or "
                          "pass its source archive")
    head = subprocess.run([git, "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    status = subprocess.run([git, "-C", str(src), "status", "--porcelain"],
                            capture_output=True, text=True, check=True).stdout
    when = subprocess.run([git, "-C", str(src), "log", "-1", "--format=%ct", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return head, bool(status.strip()), _iso(int(when))


def extract(source: EngineSource, dest: Path) -> Path:
    """The tree the services run from: the checkout itself, or the archive extracted into
    `dest` (once; a half-finished extraction is redone)."""
    if not source.is_archive:
        return source.path
    done = dest / ".extracted"
    if done.exists():
        return dest / "tree"
    shutil.rmtree(dest, ignore_errors=True)
    partial = dest / "partial"
    partial.mkdir(parents=True)
    with tarfile.open(source.path, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):  # 3.11.4+: no paths outside `partial`
            tar.extractall(partial, filter="data")
        else:  # pragma: no cover
            tar.extractall(partial)  # noqa: S202
    roots = [p for p in partial.iterdir() if p.is_dir()]
    if len(roots) != 1:
        raise EngineError(f"{source.path}: expected one top-level folder, found {len(roots)}")
    roots[0].rename(dest / "tree")
    partial.rmdir()
    # what the engine's Dockerfile bakes in: /version reads it when MEMCLAW_VERSION is unset
    (dest / "tree" / "VERSION").write_text(source.version)
    done.touch()
    return dest / "tree"
