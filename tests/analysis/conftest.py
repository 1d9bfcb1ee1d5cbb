"""Shared fixtures: the hand-built trace set (fixtures/builders.py) in a temp directory."""

from __future__ import annotations

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
