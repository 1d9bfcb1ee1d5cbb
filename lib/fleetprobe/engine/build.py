"""Build once, then reuse: the engine's source tree and one virtual environment per service,
each holding exactly that service's committed `uv.lock` (what its Dockerfile installs), made
with a Python >= 3.12 found on the machine and `uv` from PyPI.

Cache layout (`cache_root()`: FLEETPROBE_ENGINE_CACHE, else $XDG_CACHE_HOME or ~/.cache, then
fleetprobe/engine):

    tools/uv-<version>/bin/uv      uv, installed from PyPI with the kit's pip
    uv-cache/                      uv's download cache (a rebuild downloads nothing)
    <commit>/source/tree/          the extracted archive (a checkout runs in place)
    <commit>/venv/<service>/       core-storage-api's and core-api's environments
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

from fleetprobe import caches
from fleetprobe.engine.errors import EngineError
from fleetprobe.engine.python import find_python
from fleetprobe.engine.source import SERVICES, EngineSource, extract

ENV_CACHE = "FLEETPROBE_ENGINE_CACHE"
UV_VERSION = "0.9.18"  # the uv the engine's Dockerfiles copy in
BUILD_FORMAT = 2  # bump when the layout of a build changes, so old builds are redone


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
        wanted = {s: _sha256(tree / s / "uv.lock") for s in SERVICES}
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
        for service in SERVICES:
            _install_service(uv, python, tree, home, service)
        info = {"format": BUILD_FORMAT, "commit": source.commit, "version": source.version,
                "python": python, "python_version": python_version, "uv": UV_VERSION,
                "locks": wanted, "build_s": round(time.monotonic() - started, 1),
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


def _install_service(uv: Path, python: str, tree: Path, home: Path, service: str) -> None:
    venv = home / "venv" / service
    reqs = home / "venv" / f"{service}.requirements.txt"
    log_path = home / "build.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run([str(uv), "venv", "--quiet", "--allow-existing", "--python", python, str(venv)],
         f"making {service}'s environment", log_path)
    # exactly the committed lock, with hashes, as the service's Dockerfile exports it
    _run([str(uv), "export", "--frozen", "--no-dev", "--no-emit-project", "--quiet",
          "--directory", str(tree / service), "-o", str(reqs)],
         f"exporting {service}/uv.lock", log_path)
    # bytecode compiled now, once: else the first start compiles it (tens of seconds)
    _run([str(uv), "pip", "install", "--compile-bytecode", "--python",
          str(venv / "bin" / "python"), "-r", str(reqs)],
         f"installing {service}'s locked dependencies", log_path)


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
