"""The scripted model on loopback, over real HTTP: both OpenAI endpoints answer
deterministically from the rules, structured output and tool calls come back in the shapes
the OpenAI wire has, and every prompt and answer is in the trace (no backend needed)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from fleetprobe.backends.embedder import DIM, embed_texts
from fleetprobe.backends.scripted_model.process import ScriptedModelServer
from fleetprobe.backends.scripted_model.rules import load

# mem0 2.x's extraction call as mem0/memory/main.py sends it (system text shortened)
MEM0_EXTRACTION = [
    {"role": "system", "content": "# ROLE\nYour sole operation is ADD: identify ..."},
    {"role": "user", "content": (
        "## Summary\n\n\n## Last k Messages\n\n\n## Recently Extracted Memories\n[]\n\n"
        '## Existing Memories\n[{"id": "0", "text": "The payments cluster uses the blue '
        'load balancer pool."}]\n\n## New Messages\nuser: The payments cluster uses the blue '
        "load balancer pool. Alice owns the billing runbook.\n\n\n## Observation Date\n"
        "2026-01-01\n\n## Current Date\n2026-01-01\n\n# Output:")}]
CONSOLIDATION = [
    {"role": "system", "content": "You are comparing new content against existing memories"},
    {"role": "user", "content": (
        "New content to consider storing:\nThe eu vault key rotates every Monday at dawn."
        "\n\nExisting similar memories:\n- id=r1 | scope=/t/fleet/f1 | importance=0.50 | "
        "created=2026-01-01T00:00:00\n  content: The eu vault key rotates every Monday at "
        "noon.\n\nReturn the consolidation plan as structured output.")}]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptedModelServer]:
    trace = tmp_path_factory.mktemp("model") / "model.jsonl"
    with ScriptedModelServer(trace=trace) as server:
        yield server


def chat(model: ScriptedModelServer, messages: list[dict], **extra: object) -> httpx.Response:
    return httpx.post(model.openai_base_url + "/chat/completions", timeout=30,
                      json={"model": "any", "messages": messages, **extra})


def lines(model: ScriptedModelServer) -> list[dict]:
    assert model.trace is not None
    return [json.loads(line) for line in Path(model.trace).read_text().splitlines()]


def test_extraction_follows_the_rules_and_repeats_byte_for_byte(
        model: ScriptedModelServer) -> None:
    first = chat(model, MEM0_EXTRACTION, response_format={"type": "json_object"})
    again = chat(model, MEM0_EXTRACTION, response_format={"type": "json_object"})
    assert first.status_code == 200, first.text
    assert first.content == again.content  # no clock, no sampling: the same bytes
    body = first.json()
    assert body["object"] == "chat.completion" and body["created"] == 0
    assert body["choices"][0]["finish_reason"] == "stop"
    answer = json.loads(body["choices"][0]["message"]["content"])
    # the stored fact is left out (skip_at), the new one kept as a string-id item
    assert answer == {"memory": [{"id": "0", "text": "Alice owns the billing runbook.",
                                  "attributed_to": "user", "linked_memory_ids": []}]}
    recorded = [e for e in lines(model) if e["kind"] == "mem0.additive_extraction"]
    assert len(recorded) == 2 and recorded[0]["messages"] == MEM0_EXTRACTION
    assert recorded[0]["answer"] == body["choices"][0]["message"]["content"]
    assert recorded[0]["response_format"] == "json_object"


def test_structured_output_for_a_json_schema_request(model: ScriptedModelServer) -> None:
    r = chat(model, CONSOLIDATION, response_format={
        "type": "json_schema", "json_schema": {"name": "ConsolidationPlan", "schema": {}}})
    plan = json.loads(r.json()["choices"][0]["message"]["content"])
    assert plan["insert_new"] is False
    assert plan["actions"] == [{
        "action": "update", "record_id": "r1", "reason": "scripted merge",
        "new_content": "The eu vault key rotates every Monday at noon. Update: The eu vault "
                       "key rotates every Monday at dawn."}]
    assert lines(model)[-1]["response_format"] == "json_schema:ConsolidationPlan"


def test_a_rule_naming_an_offered_tool_answers_with_a_tool_call(
        tmp_path: Path, model: ScriptedModelServer) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - kind: demo.tool\n    match: {user: ['remember']}\n"
                     "    builder: constant\n    params:\n      tool: save_fact\n"
                     "      answer: {fact: '{prompt}'}\n")
    tools = [{"type": "function", "function": {"name": "save_fact", "parameters": {}}}]
    with ScriptedModelServer(rules=rules) as server:
        r = chat(server, [{"role": "user", "content": "remember this"}], tools=tools)
        plain = chat(server, [{"role": "user", "content": "remember this"}])
        other = chat(server, [{"role": "user", "content": "hello"}])
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["function"]["name"] == "save_fact"
    assert json.loads(call["function"]["arguments"]) == {"fact": "remember this"}
    # the tool is not offered: the same answer as content; no rule matches: "{}"
    assert json.loads(plain.json()["choices"][0]["message"]["content"]) == {
        "fact": "remember this"}
    assert other.json()["choices"][0]["message"]["content"] == "{}"


def test_embeddings_are_the_kit_embedder_as_floats_and_base64(
        model: ScriptedModelServer) -> None:
    texts = ["the blue load balancer pool", "Alice owns the runbook"]
    url = model.openai_base_url + "/embeddings"
    floats = httpx.post(url, json={"input": texts, "model": "x"}, timeout=30).json()
    packed = httpx.post(url, json={"input": texts, "encoding_format": "base64"},
                        timeout=30).json()
    expected = embed_texts(texts)
    assert [d["index"] for d in floats["data"]] == [0, 1]
    assert np.allclose([d["embedding"] for d in floats["data"]], expected)
    decoded = [np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4")
               for d in packed["data"]]
    assert all(len(v) == DIM for v in decoded) and np.allclose(decoded, expected, atol=1e-6)
    one = httpx.post(url, json={"input": texts[0]}, timeout=30).json()
    assert one["data"][0]["embedding"] == floats["data"][0]["embedding"]
    assert lines(model)[-1]["inputs"] == [texts[0]]
    assert httpx.post(url, json={"input": "x", "dimensions": 1536},
                      timeout=30).status_code == 400
    assert httpx.post(url, json={"input": [[1, 2, 3]]}, timeout=30).status_code == 400


def test_the_update_decision_rule_updates_deletes_keeps_and_adds() -> None:
    prompt = ("You are a smart memory manager.\n    Below is the current content of my memory "
              "which I have collected till now.\n```\n[{'id': '0', 'text': 'The staging "
              "database runs on host db-7 in rack four.'}, {'id': '1', 'text': 'Bob likes "
              "tea.'}]\n```\n The new retrieved facts are mentioned in the triple backticks. "
              "You have to analyze the new retrieved facts and determine whether these facts "
              "should be added, updated, or deleted in the memory.\n\n```\n{facts}\n```\n")
    rules = load()

    def decide(facts: list[str]) -> list[dict]:
        answer = rules.answer([{"role": "user", "content": prompt.replace(
            "{facts}", repr(facts))}])
        assert answer.kind == "mem0.update_decision"
        return json.loads(answer.content)["memory"]

    moved = decide(["The staging database runs on host db-9 in rack four.", "Carol cooks."])
    assert [(m["id"], m["event"]) for m in moved] == [("0", "UPDATE"), ("1", "NONE"),
                                                      ("new-0", "ADD")]
    gone = decide(["The staging database no longer runs on host db-7 in rack four."])
    assert gone[0]["event"] == "DELETE"
    same = decide(["The staging database runs on host db-7 in rack four."])
    assert same[0]["event"] == "NONE"


def test_a_run_copies_the_model_trace_only_without_keys(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from fleetprobe.drive.run import _keep_model_trace
    from fleetprobe.harness.trace import SecretLeakError

    source = tmp_path / "adapter-model.jsonl"
    source.write_text('{"seq": 0, "messages": "hello"}\n')
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    target = SimpleNamespace(server=SimpleNamespace(model_trace=source),
                             secrets=frozenset({"key-abc123"}))
    _keep_model_trace(target, SimpleNamespace(dir=run_dir))  # type: ignore[arg-type]
    assert (run_dir / "model.jsonl").read_text() == source.read_text()
    source.write_text('{"seq": 0, "messages": "key-abc123"}\n')
    (run_dir / "model.jsonl").unlink()
    with pytest.raises(SecretLeakError):
        _keep_model_trace(target, SimpleNamespace(dir=run_dir))  # type: ignore[arg-type]
    assert not (run_dir / "model.jsonl").exists()
