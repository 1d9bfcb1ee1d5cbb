"""Each backend in its own locked virtual environment, built on demand and cached.

An environment is named by a spec in `locks/` (`<env>.in`: the backend's pinned packages plus
what the adapter imports) and pinned by its lock (`<env>.lock`: every package with hashes,
compiled by uv for Python 3.11 on every platform). `ensure("crewai")` returns the Python of
`~/.cache/fleetprobe/backends/crewai-<hash>/` (the hash is of the lock and the interpreter), and
builds it first if it is missing: `uv venv` + `uv pip sync --require-hashes`. The adapter
process runs from that Python (`process.BackendServer`), so no backend library is ever
installed into the kit's venv, and the kit's `requirements.lock` never changes.

    python -m fleetprobe.backends.envs build [ENV ...]   # build (or find) environments
    python -m fleetprobe.backends.envs lock [ENV ...]    # recompile locks from the specs
    python -m fleetprobe.backends.envs list              # env, lock hash, built or not
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fleetprobe.base import caches

LOCKS = Path(__file__).resolve().parent / "locks"
ENV_CACHE = "FLEETPROBE_BACKEND_CACHE"  # overrides ~/.cache/fleetprobe/backends
SHARED_SPECS = ("adapter", "langgraph-stores")  # included by others (-r), not environments
PYTHON_VERSION = "3.11"  # the locks' target (requires-python of the kit is >= 3.11)


class EnvError(RuntimeError):
    """An environment could not be locked or built; the message says why and what to do."""


def known() -> list[str]:
    """Every environment with a spec (adapter.in is shared, not an environment)."""
    return sorted(p.stem for p in LOCKS.glob("*.in") if p.stem not in SHARED_SPECS)


def lock_file(env: str) -> Path:
    path = LOCKS / f"{env}.lock"
    if not (LOCKS / f"{env}.in").exists():
        raise EnvError(f"no backend environment {env!r} (known: {', '.join(known())})")
    if not path.exists():
        raise EnvError(f"{path} is missing: python -m fleetprobe.backends.envs lock {env}")
    return path


def cache_root() -> Path:
    return caches.cache_root("backends", ENV_CACHE)


def env_hash(env: str) -> str:
    """Of the lock's bytes and the interpreter the venv is made from: a new lock or another
    Python is another directory, so a cached venv always matches its lock."""
    h = hashlib.sha256(lock_file(env).read_bytes())
    h.update(f"{sys.version_info[:3]}|{sys.executable}|{platform.machine()}".encode())
    return h.hexdigest()[:16]


def env_dir(env: str) -> Path:
    return cache_root() / f"{env}-{env_hash(env)}"


def python_of(directory: Path) -> Path:
    return directory / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def uv_bin() -> str:
    try:
        from uv import find_uv_bin
    except ImportError as exc:
        raise EnvError("uv is not installed in the kit's venv (make setup installs it from "
                       "requirements.lock)") from exc
    return find_uv_bin()


def _uv(*args: str) -> None:
    env = {**os.environ, "UV_NO_PROGRESS": "1"}
    done = subprocess.run([uv_bin(), *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise EnvError(f"uv {args[0]} {args[1] if len(args) > 1 else ''} failed "
                       f"(exit {done.returncode}):\n{done.stderr[-4000:]}")


def ensure(env: str) -> Path:
    """The environment's Python, built first if the cache lacks it. Builds are serialized by a
    file lock (a batch starts several adapters at once) and land atomically: a half-built
    venv is never used."""
    target = env_dir(env)
    if python_of(target).exists():
        return python_of(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with caches.locked(target.parent / f".{env}.lock-file"):
        if python_of(target).exists():  # another process built it meanwhile
            return python_of(target)
        building = target.with_name(target.name + f".building-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        started = time.monotonic()
        _uv("venv", "--quiet", "--no-project", "--python", sys.executable, str(building))
        _uv("pip", "sync", "--quiet", "--require-hashes", "--python",
            str(python_of(building)), str(lock_file(env)))
        building.rename(target)
        print(f"backend environment {env}: built in {time.monotonic() - started:.0f} s "
              f"({target})", file=sys.stderr)
    return python_of(target)


def compile_lock(env: str) -> Path:
    """Recompile `<env>.lock` from `<env>.in` (uv pip compile, universal, with hashes)."""
    spec = LOCKS / f"{env}.in"
    if not spec.exists():
        raise EnvError(f"no spec {spec}")
    out = LOCKS / f"{env}.lock"
    _uv("pip", "compile", "--quiet", "--universal", "--generate-hashes", "--no-header",
        "--python-version", PYTHON_VERSION, "--no-annotate", str(spec), "-o", str(out))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fleetprobe.backends.envs",
                                description="the backends' locked environments")
    p.add_argument("command", choices=["build", "lock", "list"])
    p.add_argument("envs", nargs="*", help="environment names (default: all)")
    args = p.parse_args(argv)
    names = args.envs or known()
    try:
        for env in names:
            if args.command == "lock":
                print(compile_lock(env))
            elif args.command == "build":
                print(ensure(env))
            else:
                built = python_of(env_dir(env)).exists()
                print(f"{env}\t{env_hash(env)}\t{'built' if built else 'not built'}")
    except EnvError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
