"""Each backend runs from its own locked environment: building one (from a cold environment
cache) and running its adapter leaves the kit's venv and requirements.lock exactly as they
were, and the backend's library is importable only in its own environment."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
from importlib import metadata
from pathlib import Path

import httpx
import pytest

from fleetprobe.backends import envs
from fleetprobe.backends.process import BackendServer

from .conftest import ROOT, locked_version, need

pytestmark = pytest.mark.backends


def kit_packages() -> set[tuple[str, str]]:
    return {(d.metadata["Name"].lower(), d.version) for d in metadata.distributions()}


def lock_digest() -> str:
    return hashlib.sha256((ROOT / "requirements.lock").read_bytes()).hexdigest()


def test_every_spec_has_a_lock_with_hashes() -> None:
    assert set(envs.known()) >= {"langgraph", "mem0", "crewai"}
    for env in envs.known():
        text = envs.lock_file(env).read_text()
        assert "--hash=sha256:" in text
        pins = [line for line in text.splitlines() if "==" in line and not line.startswith(" ")]
        assert pins and all("--hash" not in p for p in pins)  # one pin per line, hashes below


def test_building_and_running_a_backend_leaves_the_kit_unchanged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("langgraph")
    before, lock_before = kit_packages(), lock_digest()
    monkeypatch.setenv(envs.ENV_CACHE, str(tmp_path / "cache"))  # a cold environment cache
    python = envs.ensure("langgraph")
    assert python.is_relative_to(tmp_path / "cache")
    in_env = subprocess.run([str(python), "-c", "import langgraph, importlib.metadata as m; "
                             "print(m.version('langgraph'))"], capture_output=True, text=True)
    assert in_env.stdout.strip() == locked_version("langgraph"), in_env.stderr
    with BackendServer("langgraph") as server:
        assert server.python == python
        tenant_id, key = server.create_tenant()
        written = httpx.post(server.base_url + "/api/v1/memories", timeout=30,
                             headers={"X-API-Key": key},
                             json={"tenant_id": tenant_id, "content": "x", "agent_id": "a"})
        assert written.status_code == 201, written.text
        version = httpx.get(server.base_url + "/api/v1/version", timeout=30).json()
        assert version["backend_env"]["name"] == "langgraph"
        assert version["backend_env"]["lock_sha256"] == hashlib.sha256(
            envs.lock_file("langgraph").read_bytes()).hexdigest()
    assert kit_packages() == before
    assert lock_digest() == lock_before
    assert importlib.util.find_spec("langgraph") is None  # never in the kit's venv


def test_an_unknown_environment_says_which_exist() -> None:
    with pytest.raises(envs.EnvError, match="known: .*langgraph"):
        envs.lock_file("no-such-backend")
