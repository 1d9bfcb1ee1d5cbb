"""Build once, then reuse: the engine's source tree and one virtual environment per service,
made with a Python >= 3.12 found on the machine and `uv` from PyPI. Each environment holds
exactly the service's committed `uv.lock` (what its Dockerfile installs); a commit with no
lock (v2.11.0 and before) has its `pyproject.toml` resolved as of the commit's time
(`--exclude-newer`), and the project installed as its Dockerfile does. Either way the exact
versions installed are written to `build.json` and reach every run's manifest.

Cache layout (`cache_root()`: FLEETPROBE_ENGINE_CACHE, else $XDG_CACHE_HOME or ~/.cache, then
fleetprobe/engine):

    tools/uv-<version>/bin/uv      uv, installed from PyPI with the kit's pip
    uv-cache/                      uv's download cache (a rebuild downloads nothing)
    <commit>/source/tree/          the extracted archive (a checkout runs in place)
    <commit>/venv/<service>/       core-storage-api's and core-api's environments
    <commit>/venv/<service>.requirements.txt   the pins installed (exported lock or resolution)
    <commit>/build.json            what was built, with what, how long it took
    <commit>/build.log             uv's output
    <commit>/run/                  the instance `fleetprobe engine up` starts (services.py)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fleetprobe.base import caches
from fleetprobe.engine.errors import EngineError
from fleetprobe.engine.python import find_python
from fleetprobe.engine.source import SERVICES, EngineSource, extract

ENV_CACHE = "FLEETPROBE_ENGINE_CACHE"
UV_VERSION = "0.9.18"  # the uv the engine's Dockerfiles copy in
BUILD_FORMAT = 3  # bump when the layout of a build changes, so old builds are redone


def cache_root() -> Path:
    return caches.cache_root("engine", ENV_CACHE)


@dataclass(frozen=True)
class EngineBuild:
    source: EngineSource
    home: Path  # <cache>/<commit>
    tree: Path  # where the engine's code is
    info: dict

    def python(self, service: str) -> Path:
        return self.home / "venv" / service / "bin" / "python"


def commit_home(source: EngineSource) -> Path:
    suffix = "-dirty" if source.dirty else ""
    return cache_root() / f"{source.commit[:12]}{suffix}"


def locked(path: Path) -> contextlib.AbstractContextManager[None]:
    """One builder (or starter) at a time per commit, across processes."""
    return caches.locked(path)


def ensure_built(source: EngineSource, log=print) -> EngineBuild:  # noqa: ANN001
    """The build for `source`, made now if missing or stale (a lock file changed)."""
    home = commit_home(source)
    with locked(home / ".lock"):
        tree = extract(source, home / "source")
        wanted = {s: _sha256(_dependency_file(tree, s)) for s in SERVICES}
        stamp = home / "build.json"
        if stamp.exists():
            info = json.loads(stamp.read_text())
            if (info.get("format") == BUILD_FORMAT and info.get("locks") == wanted
                    and all((home / "venv" / s / "bin" / "python").exists() for s in SERVICES)):
                return EngineBuild(source, home, tree, info)
        started = time.monotonic()
        python, python_version = find_python()
        log(f"engine: building {source.short_commit} (v{source.version}) with Python "
            f"{python_version} ({python}) into {home}; a first build downloads the engine's "
            "locked dependencies (a few minutes)")
        uv = ensure_uv(log)
        resolution = resolution_of(source, tree)
        if resolution["mode"] == "resolved":
            log(f"engine: {source.short_commit} has no uv.lock; resolving its pyproject.toml "
                f"as of the commit ({resolution['exclude_newer']})")
        installed = {s: _install_service(uv, python, tree, home, s, resolution)
                     for s in SERVICES}
        info = {"format": BUILD_FORMAT, "commit": source.commit, "version": source.version,
                "committed_at": source.committed_at,
                "python": python, "python_version": python_version, "uv": UV_VERSION,
                "locks": wanted, "resolution": resolution, "dependencies": installed,
                "build_s": round(time.monotonic() - started, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        stamp.write_text(json.dumps(info, indent=2) + "\n")
        log(f"engine: built in {info['build_s']} s")
        return EngineBuild(source, home, tree, info)


def ensure_uv(log=print) -> Path:  # noqa: ANN001
    target = cache_root() / "tools" / f"uv-{UV_VERSION}"
    uv = target / "bin" / "uv"
    if uv.exists():
        return uv
    log(f"engine: installing uv {UV_VERSION} from PyPI into {target}")
    partial = target.with_name(target.name + ".partial")
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
          "--target", str(partial), f"uv=={UV_VERSION}"], "installing uv", None)
    partial.rename(target)
    return uv


def uv_env() -> dict[str, str]:
    """uv with its cache beside the builds, never fetching a Python of its own."""
    return {**os.environ, "UV_CACHE_DIR": str(cache_root() / "uv-cache"),
            "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def _dependency_file(tree: Path, service: str) -> Path:
    lock = tree / service / "uv.lock"
    return lock if lock.is_file() else tree / service / "pyproject.toml"


def resolution_of(source: EngineSource, tree: Path) -> dict[str, str | None]:
    """How the services' dependencies are chosen: their committed locks, or (a commit with
    none) their pyproject.toml resolved against PyPI as it was at the commit's time."""
    if all((tree / s / "uv.lock").is_file() for s in SERVICES):
        return {"mode": "uv.lock", "exclude_newer": None}
    return {"mode": "resolved", "exclude_newer": source.committed_at}


def _install_service(uv: Path, python: str, tree: Path, home: Path, service: str,
                     resolution: dict[str, str | None]) -> dict[str, str]:
    """The service's environment; returns what is installed in it ({name: version})."""
    venv = home / "venv" / service
    venv_python = str(venv / "bin" / "python")
    reqs = home / "venv" / f"{service}.requirements.txt"
    log_path = home / "build.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run([str(uv), "venv", "--quiet", "--allow-existing", "--python", python, str(venv)],
         f"making {service}'s environment", log_path)
    as_of = resolution["exclude_newer"]
    if as_of is None:
        # exactly the committed lock, with hashes, as the service's Dockerfile exports it
        _run([str(uv), "export", "--frozen", "--no-dev", "--no-emit-project", "--quiet",
              "--directory", str(tree / service), "-o", str(reqs)],
             f"exporting {service}/uv.lock", log_path)
    else:
        # the lock the commit lacks, made now: its pyproject.toml as PyPI stood then
        _run([str(uv), "pip", "compile", "--quiet", "--python", venv_python,
              "--exclude-newer", as_of, "--generate-hashes", "--no-header",
              str(tree / service / "pyproject.toml"), "-o", str(reqs)],
             f"resolving {service}'s dependencies as of {as_of}", log_path)
    # bytecode compiled now, once: else the first start compiles it (tens of seconds)
    _run([str(uv), "pip", "install", "--compile-bytecode", "--python", venv_python,
          "-r", str(reqs)], f"installing {service}'s dependencies", log_path)
    if as_of is not None:
        # the project itself, as its Dockerfile installs it: /version reads its metadata
        _run([str(uv), "pip", "install", "--no-deps", "--exclude-newer", as_of,
              "--python", venv_python, str(tree / service)],
             f"installing {service} itself", log_path)
    return _installed(uv, venv_python, log_path)


def _installed(uv: Path, venv_python: str, log_path: Path) -> dict[str, str]:
    out = subprocess.run([str(uv), "pip", "freeze", "--python", venv_python],
                         capture_output=True, text=True, env=uv_env())
    if out.returncode != 0:
        raise EngineError(f"engine build: `uv pip freeze` failed: {out.stderr.strip()}")
    pins = {}
    for line in out.stdout.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            pins[name.strip().lower()] = version.strip()
        elif " @ " in line:  # a project installed from the source tree
            pins[line.split(" @ ")[0].strip().lower()] = "source"
    return pins


def _run(cmd: list[str], what: str, log_path: Path | None) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, env=uv_env())
    if log_path is not None:
        with log_path.open("a") as log:
            log.write(f"$ {' '.join(cmd)}\n{out.stdout}{out.stderr}\n")
    if out.returncode != 0:
        tail = "\n".join((out.stderr or out.stdout).strip().splitlines()[-15:])
        raise EngineError(f"engine build failed {what} (exit {out.returncode}); "
                          f"PyPI must be reachable on a first build:\n{tail}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
