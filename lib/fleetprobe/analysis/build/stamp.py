"""Whether the executed report notebook and every file the report wrote are current, so that
`make report` with nothing changed starts no kernel at all.

The executed notebook is a function of its source, its parameters, the traces and the code
and libraries that build and display the report (the kernel runs nothing else). After a
successful build the driver records a hash of those (`notebook_key`) with the hash of every
file the build wrote and of the executed notebook. The next `make report` recomputes the key
(reading the traces' and code's bytes: a fraction of a second) and hashes those files: if
everything matches, there is nothing to do. Any change (a trace, a line of code, a file in
reports/ edited or deleted) runs the notebook, whose build remakes only the stale sections.
The stamp lives in the report cache, not in reports/: it names machine-local state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fleetprobe.analysis.build import inputs, store


def notebook_key(source: Path, parameters: Mapping[str, Any]) -> str:
    runs = inputs.Runs(Path(parameters.get("traces_root", "data/traces")))
    return inputs.digest(Path(source).read_bytes(), json.dumps(parameters, sort_keys=True),
                         inputs.environment(), inputs.tree_digest(
                             [inputs.ANALYSIS, inputs.ANALYSIS.parent / "base" / "notebooks.py"],
                             inputs.ANALYSIS.parent), inputs.shared_code(), runs.of(None))


def _path(out_dir: Path, kind: str) -> Path | None:
    root = store.cache_dir()
    name = inputs.digest(str(Path(out_dir).resolve()))[:24]
    return None if root is None else root / "stamps" / f"{name}.{kind}.json"


def record_files(out_dir: Path, names: Iterable[str]) -> None:
    """The files a build wrote under `out_dir` (the writer calls it)."""
    path = _path(out_dir, "files")
    if path is not None:
        _dump(path, sorted(names))


def record(out_dir: Path, key: str, notebook: Path) -> None:
    """After the notebook ran: the key and the hash of every file the build wrote."""
    files_path, path = _path(out_dir, "files"), _path(out_dir, "stamp")
    if path is None or files_path is None or not files_path.is_file():
        return
    names = [*json.loads(files_path.read_text()), str(Path(notebook).relative_to(out_dir))]
    _dump(path, {"key": key, "files": {n: inputs.file_digest(Path(out_dir) / n)
                                       for n in names}})


def current(out_dir: Path, key: str) -> bool:
    path = _path(out_dir, "stamp")
    if path is None or not path.is_file():
        return False
    try:
        stamp = json.loads(path.read_text())
    except ValueError:
        return False
    return stamp.get("key") == key and all(
        inputs.file_digest(Path(out_dir) / name) == sha
        for name, sha in stamp.get("files", {}).items())


def _dump(path: Path, value: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, sort_keys=True))
    except OSError:
        pass
