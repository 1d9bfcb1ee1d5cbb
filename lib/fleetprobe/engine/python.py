"""A Python >= 3.12 on this machine for the engine's virtual environments (the kit itself runs
on 3.11+, the engine needs 3.12+). Looked for, in order: FLEETPROBE_ENGINE_PYTHON, the
interpreter running the kit, python3.12+ on PATH, pyenv's and uv's installed versions, and
the usual system prefixes. A candidate counts only if it runs and reports its version; 3.12
(what the engine's images run) is preferred to newer ones.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from fleetprobe.engine.errors import EngineError

ENV_PYTHON = "FLEETPROBE_ENGINE_PYTHON"
MINIMUM = (3, 12)
_MINORS = range(20, MINIMUM[1] - 1, -1)  # newest first


def candidates() -> list[str]:
    found: list[str] = []
    if os.environ.get(ENV_PYTHON):
        found.append(os.environ[ENV_PYTHON])
    found.append(sys.executable)
    found += [p for m in _MINORS if (p := shutil.which(f"python3.{m}"))]
    home = Path.home()
    roots = [Path(os.environ.get("PYENV_ROOT") or home / ".pyenv") / "versions",
             home / ".local" / "share" / "uv" / "python"]
    for root in roots:
        if root.is_dir():
            found += [str(p) for p in sorted(root.glob("*/bin/python3"), reverse=True)]
    for prefix in ("/usr/local/bin", "/usr/bin", "/opt/homebrew/bin"):
        found += [f"{prefix}/python3.{m}" for m in _MINORS]
    return list(dict.fromkeys(found))


def version_of(python: str) -> tuple[int, int] | None:
    """(major, minor) as the interpreter itself reports, or None when it does not run (a
    pyenv shim for a version that is not active exits non-zero)."""
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) != 2:
        return None
    return int(parts[0]), int(parts[1])


def find_python() -> tuple[str, str]:
    """(path, "3.12") of the interpreter to use: FLEETPROBE_ENGINE_PYTHON when set, else the
    first 3.12 (the engine's images run 3.12), else the first newer one; EngineError naming
    what is missing."""
    usable: list[tuple[str, tuple[int, int]]] = []
    for python in candidates():
        if not (os.path.isabs(python) and os.access(python, os.X_OK)):
            continue
        version = version_of(python)
        if version and version >= MINIMUM:
            if python == os.environ.get(ENV_PYTHON) or version == MINIMUM:
                return python, f"{version[0]}.{version[1]}"
            usable.append((python, version))
    if usable:
        python, version = usable[0]
        return python, f"{version[0]}.{version[1]}"
    raise EngineError(
        "MemClaw's engine needs Python >= 3.12 and none was found (looked at "
        f"{ENV_PYTHON}, this interpreter {sys.executable}, python3.12+ on PATH, "
        "~/.pyenv/versions, ~/.local/share/uv/python, /usr/local/bin, /usr/bin). Install one "
        "(`pyenv install 3.12`, `apt-get install python3.12`, `uv python install 3.12`) or "
        f"set {ENV_PYTHON}=/path/to/python3.12")
