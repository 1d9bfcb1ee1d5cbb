"""Shared fixtures: the hand-built trace set (fixtures/builders.py) in a temp directory, a copy
of it a test may change, and an empty report cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .fixtures.builders import build_fixture_traces


@pytest.fixture(scope="session")
def fixture_traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """(traces root, {role: run_id}) for the standard fixture set."""
    root = tmp_path_factory.mktemp("traces")
    return root, build_fixture_traces(root)


@pytest.fixture(scope="session")
def results(fixture_traces):
    from fleetprobe.analysis.base.results import Results

    return Results.load(fixture_traces[0])


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty report cache (build/store.py) for this test alone."""
    from fleetprobe.analysis.build import store

    root = tmp_path / "cache"
    monkeypatch.setenv(store.ENV_CACHE, str(root))
    return root


@pytest.fixture()
def traces(fixture_traces, tmp_path: Path) -> Path:
    """A copy of the fixture traces this test may change."""
    return Path(shutil.copytree(fixture_traces[0], tmp_path / "traces"))
