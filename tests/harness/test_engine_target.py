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
from fleetprobe.engine.build import resolution_of
from fleetprobe.engine.services import start_command
from fleetprobe.engine.source import ENV_SRC, inspect_source, resolve_source
from fleetprobe.harness.experiment import load_params
from fleetprobe.harness.targets import TargetError, TargetParams, open_target

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
    with pytest.raises(EngineError, match="pyproject.toml"):
        inspect_source(tmp_path)


def _archive(path: Path, comment: str | None, mtime: int = 1779993079) -> Path:
    data = b'[project]\nname = "core-api"\nversion = "2.29.0"\n'
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers={"comment": comment} if comment else None) as tar:
        info = tarfile.TarInfo("caura-v2.29.0/core-api/pyproject.toml")
        info.size, info.mtime = len(data), mtime  # git archive: every entry at commit time
        tar.addfile(info, io.BytesIO(data))
    return path


def test_archive_time_is_the_commit_time_git_archive_stamps(tmp_path: Path) -> None:
    source = inspect_source(_archive(tmp_path / "caura.tar.gz", COMMIT, mtime=1779993079))
    assert source.committed_at == "2026-05-28T18:31:19Z"  # e2d805e's commit time


def _tree(root: Path, *, serve: bool, locks: bool) -> Path:
    for service, app in (("core-api", "core_api"), ("core-storage-api", "core_storage_api")):
        (root / service).mkdir(parents=True)
        (root / service / "pyproject.toml").write_text("[project]\n")
        if locks:
            (root / service / "uv.lock").write_text("version = 1\n")
        (root / service / "Dockerfile").write_text(
            'FROM python:3.12\nCMD ["uvicorn", "ignored:app"]\n'
            f'CMD ["uvicorn", "{app}.app:app", "--host", "0.0.0.0", "--port", "8000", '
            '"--workers", "2", "--timeout-keep-alive", "65"]\n')
    (root / "common").mkdir()
    if serve:
        (root / "common" / "serve.py").write_text("")
    return root


def test_start_command_follows_the_commit(tmp_path: Path) -> None:
    """common.serve where the commit has it; else the Dockerfile's last CMD, on loopback with
    one worker and its other options kept."""
    new = _tree(tmp_path / "new", serve=True, locks=True)
    old = _tree(tmp_path / "old", serve=False, locks=False)
    assert start_command(new, "core-api", 4100)[:3] == ["-m", "common.serve",
                                                        "core_api.app:app"]
    assert start_command(old, "core-storage-api", 4100) == [
        "-m", "uvicorn", "core_storage_api.app:app", "--timeout-keep-alive", "65",
        "--host", "127.0.0.1", "--port", "4100", "--workers", "1"]
    (old / "core-api" / "Dockerfile").write_text('CMD ["gunicorn", "core_api.app:app"]\n')
    with pytest.raises(EngineError, match="gunicorn"):
        start_command(old, "core-api", 4100)


def test_a_commit_without_locks_resolves_as_of_its_time(tmp_path: Path) -> None:
    source = inspect_source(_archive(tmp_path / "caura.tar.gz", COMMIT))
    locked = resolution_of(source, _tree(tmp_path / "new", serve=True, locks=True))
    assert locked == {"mode": "uv.lock", "exclude_newer": None}
    unlocked = resolution_of(source, _tree(tmp_path / "old", serve=False, locks=False))
    assert unlocked == {"mode": "resolved", "exclude_newer": "2026-05-28T18:31:19Z"}


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
