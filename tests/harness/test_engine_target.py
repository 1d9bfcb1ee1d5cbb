"""`target.kind: engine` without starting the engine (that is tests/engine, make test-engine):
the params it accepts, how it names its source and its commit, and the errors a user meets."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from fleetprobe.engine import EngineError
from fleetprobe.engine import python as engine_python
from fleetprobe.engine.source import ENV_SRC, inspect_source, resolve_source
from fleetprobe.runner import load_params
from fleetprobe.targets import TargetError, TargetParams, open_target

REPO = Path(__file__).resolve().parents[2]
COMMIT = "b65ecbe17605f2a80af319028e703e5e36c0ebc8"


def test_engine_params_default_to_header_identity() -> None:
    params = TargetParams(kind="engine", profile="memclaw-2026-05-30")
    assert params.auth == "headers"
    assert params.profile is None  # a batch plan's profile does not name the engine
    assert TargetParams(kind="engine", auth="gate").auth == "gate"


@pytest.mark.parametrize("fields", [{"auth": "key"}, {"embedder": "minilm"}])
def test_engine_params_refuse_what_the_engine_has_not(fields: dict) -> None:
    with pytest.raises(ValidationError):
        TargetParams(kind="engine", **fields)


@pytest.mark.parametrize("experiment", ["leakage", "contradiction", "provenance",
                                        "propagation", "matrix", "separation"])
def test_engine_params_files_load(experiment: str) -> None:
    params = load_params(REPO / "params" / "engine" / f"{experiment}.yaml", [])
    assert params["experiment"] == experiment
    assert TargetParams(**params["target"]).kind == "engine"


def test_missing_source_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_SRC, raising=False)
    with pytest.raises(EngineError, match=ENV_SRC):
        resolve_source(None)
    with pytest.raises(TargetError, match="b65ecbe"), open_target(TargetParams(kind="engine")):
        pass


def test_a_folder_that_is_not_the_engine_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="uv.lock"):
        inspect_source(tmp_path)


def _archive(path: Path, comment: str | None) -> Path:
    data = b'[project]\nname = "core-api"\nversion = "2.29.0"\n'
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": comment} if comment else None) as tar:
        info = tarfile.TarInfo("caura-v2.29.0/core-api/pyproject.toml")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def test_archive_commit_from_its_git_header_else_its_name(tmp_path: Path) -> None:
    with_header = inspect_source(_archive(tmp_path / "caura.tar.gz", COMMIT))
    assert (with_header.commit, with_header.version) == (COMMIT, "2.29.0")
    named = inspect_source(_archive(tmp_path / "caura-v2.29.0-b65ecbe.tar.gz", None))
    assert named.commit == "b65ecbe"
    with pytest.raises(EngineError, match="commit"):
        inspect_source(_archive(tmp_path / "caura.tgz", None))


def test_no_python_312_names_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setattr(engine_python, "candidates", lambda: [str(tmp_path / "python3.12")])
    with pytest.raises(EngineError, match="Python >= 3.12.*FLEETPROBE_ENGINE_PYTHON"):
        engine_python.find_python()
