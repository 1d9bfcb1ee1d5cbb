"""The scripted model's Cognee rules (rules.yaml) answer cognify's two structured-output
prompts as the installed cognee 1.6.5 sends them (system prompt with the pydantic schema
appended, the chunk as the user message) with JSON its models validate: the summary is the
chunk, the graph a `Statement` node per sentence. No backend environment needed."""

from __future__ import annotations

import json

from fleetprobe.backends.scripted_model.rules import load

CHUNK = "The launch code is alpha bravo. Fleet two rotates it at dusk."
# the prompts' first lines and the schema titles, as cognee 1.6.5's litellm_native adapter sends
SUMMARY_SYSTEM = ("Summarize the chunk for retrieval.\n\nOutput two sections only.\n...\n"
                  "You MUST respond with valid JSON conforming to this schema:\n"
                  '```json\n{"title": "SummarizedContent", "type": "object"}\n```')
GRAPH_SYSTEM = ("You are a top-tier algorithm designed for extracting information in "
                "structured formats to build a knowledge graph.\n...\n"
                '```json\n{"title": "KnowledgeGraph", "type": "object"}\n```')


def _ask(system: str) -> tuple[str, dict]:
    answer = load().answer([{"role": "system", "content": system},
                            {"role": "user", "content": CHUNK}])
    return answer.kind, json.loads(answer.content)


def test_summary_is_the_chunk() -> None:
    kind, value = _ask(SUMMARY_SYSTEM)
    assert kind == "cognee.summarize_chunk"
    assert value == {"summary": CHUNK, "description": ""}


def test_graph_is_a_node_per_sentence() -> None:
    kind, value = _ask(GRAPH_SYSTEM)
    assert kind == "cognee.extract_graph"
    assert [n["name"] for n in value["nodes"]] == [
        "The launch code is alpha bravo.", "Fleet two rotates it at dusk."]
    assert all(n["type"] == "Statement" and n["id"] == n["description"] == n["name"]
               for n in value["nodes"])
    assert "edges" not in value  # KnowledgeGraph.edges defaults to []


def test_chunk_results_best_first_across_datasets() -> None:
    """Cognee's CHUNKS `score` is a cosine distance: the closer chunk of two datasets comes
    first, with similarity 1 - distance (the adapter's parsing, no Cognee needed)."""
    from fleetprobe.backends.cognee_backend import _chunks

    near, far = "3b153d01-c5b0-4dd9-8cfd-fbcac73ee596", "9788e043-34cc-4d60-897a-9525e4792b9e"
    found = _chunks([{"search_result": [{"document_id": far, "score": 1.03}]},
                     {"search_result": [{"document_id": near, "score": 0.42}]}])
    assert [str(doc) for doc, _ in found] == [near, far]
    assert abs(found[0][1] - 0.58) < 1e-9
