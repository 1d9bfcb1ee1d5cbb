"""The pinned environment: requirements.lock covers pyproject.toml, environment.yml is the
lock's, and this environment has exactly the locked versions installed."""

from __future__ import annotations

from importlib import metadata

from packaging.utils import canonicalize_name

from fleetprobe.base import lockfile


def test_lock_and_pyproject_agree() -> None:
    assert lockfile.problems() == []


def test_environment_yml_is_generated_from_the_lock() -> None:
    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("  - python=")]

    assert body(lockfile.ENVIRONMENT.read_text()) == body(lockfile.environment_yml())


def test_installed_versions_are_the_locked_ones() -> None:
    installed = {canonicalize_name(d.metadata["Name"]): d.version
                 for d in metadata.distributions()}
    wrong = {name: (version, installed.get(name)) for name, version in lockfile.locked().items()
             if installed.get(name) != version}
    assert wrong == {}, "run `make setup` (installs requirements.lock): " + repr(wrong)
