"""Shared fixtures: the real reference server on a loopback port, fresh tenants, trace dirs.

`reference_server` is one server per test session (profile memclaw-2026-05-30); tests that
need another profile, other rate limits or a server they may kill call `start_server(...)`,
which stops whatever it started at the end of the test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetprobe.harness.targets import Target, target_for_server

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PROFILE = "memclaw-2026-05-30"
REPORT_CACHE_ENV = "FLEETPROBE_REPORT_CACHE"  # fleetprobe.analysis.build.store


def _server(profile: str, extra_args: tuple[str, ...] = (), **kwargs: Any) -> Any:
    from reference_server.launch.process import ReferenceServer

    return ReferenceServer(profile=profile, extra_args=extra_args, **kwargs)


# The longest modules (`pytest --durations=0`, summed per file), collected first: under
# `--dist loadscope` xdist hands modules out in collection order, so a long one left for the
# end keeps one worker busy after the other has finished. Order only, never results.
LONGEST_FIRST = (
    "harness/test_matrix.py", "harness/test_separation_run.py", "harness/test_faults_run.py",
    "harness/test_contradiction_run.py", "harness/test_provenance_run.py",
    "analysis/test_committed_report.py", "server/test_fuzz.py", "analysis/test_report.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """The report's database cache in a directory of this test process (xdist: each worker
    its own), not in the user's ~/.cache; notebook kernels the tests start inherit it."""
    if not os.environ.get(REPORT_CACHE_ENV):
        os.environ[REPORT_CACHE_ENV] = tempfile.mkdtemp(prefix="fleetprobe-test-report-cache-")
        config.add_cleanup(lambda: shutil.rmtree(os.environ.pop(REPORT_CACHE_ENV),
                                                 ignore_errors=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {REPO / "tests" / name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


@pytest.fixture(scope="session")
def reference_server() -> Iterator[Any]:
    with _server(DEFAULT_PROFILE) as server:
        yield server


@pytest.fixture
def start_server() -> Iterator[Callable[..., Any]]:
    """`start_server(profile=..., extra_args=(...))` -> a started ReferenceServer."""
    started: list[Any] = []

    def start(profile: str = DEFAULT_PROFILE, extra_args: tuple[str, ...] = (),
              **kwargs: Any) -> Any:
        server = _server(profile, extra_args, **kwargs)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def target(reference_server: Any) -> Target:
    """A fresh tenant on the session server, as a harness Target."""
    return target_for_server(reference_server, DEFAULT_PROFILE)


@pytest.fixture
def traces_root(tmp_path: Path) -> Path:
    return tmp_path / "traces"


def files_containing(root: Path, secrets: set[str]) -> list[Path]:
    """Every file under root whose bytes contain any of the secrets."""
    needles = [s.encode() for s in secrets if s]
    assert needles, "nothing to scan for"
    return [
        path for path in root.rglob("*")
        if path.is_file() and any(n in path.read_bytes() for n in needles)
    ]


@pytest.fixture
def scan_for_secrets() -> Callable[[Path, set[str]], list[Path]]:
    """`scan_for_secrets(root, keys)` -> files under root that contain any key."""
    return files_containing
