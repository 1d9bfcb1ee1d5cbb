"""Scope bugs the backends' users reported, reproduced through the adapter on the wire.

CrewAI matches scope paths as string prefixes (crewAIInc/crewAI#7543): a recall in fleet
`f1` returns a row remembered in fleet `f10`. LangGraph 1.2.22 matches namespace prefixes by
whole segments (the JavaScript port's langchain-ai/langgraphjs#2721 does not): no leak."""

from __future__ import annotations

import importlib.util

import httpx
import pytest

from fleetprobe.backends.process import BackendServer

pytestmark = pytest.mark.backends


def _sibling_prefix_probe(backend: str) -> bool:
    """Write in fleet f10, search fleet f1 with the row's own text: did it come back?"""
    if importlib.util.find_spec({"crewai": "crewai", "langgraph": "langgraph",
                                 "mem0": "mem0"}[backend]) is None:
        pytest.skip(f"{backend} is not installed (make backends-smoke)")
    with BackendServer(backend) as server:
        tenant_id, key = server.create_tenant()
        url, headers = server.base_url + "/api/v1", {"X-API-Key": key}
        text = "Tundra glacier audit moves to the autumn window"
        written = httpx.post(url + "/memories", headers=headers, timeout=30, json={
            "tenant_id": tenant_id, "agent_id": "writer", "fleet_id": "f10",
            "visibility": "scope_team", "content": text})
        assert written.status_code == 201, written.text
        found = httpx.post(url + "/search", headers=headers, timeout=30, json={
            "tenant_id": tenant_id, "query": text, "fleet_ids": ["f1"], "top_k": 5})
        assert found.status_code == 200, found.text
        return any(item["id"] == written.json()["id"] for item in found.json()["items"])


def test_crewai_scope_prefix_crosses_the_path_boundary() -> None:
    assert _sibling_prefix_probe("crewai") is True  # crewAIInc/crewAI#7543, open


def test_langgraph_namespace_prefix_stays_within_segments() -> None:
    assert _sibling_prefix_probe("langgraph") is False


def test_mem0_fleet_filter_is_exact() -> None:
    assert _sibling_prefix_probe("mem0") is False
