"""The scripted model's Graphiti rules (rules.yaml `graphiti.*`, builders `names` and
`relate`), on prompts shaped as graphiti-core 0.31.2 sends them: deterministic entities and
facts, and the structured-output keys its pydantic models require. No server, no backend."""

from __future__ import annotations

import json

from fleetprobe.backends.scripted_model.rules import load

RULES = load()


def ask(system: str, user: str) -> tuple[str, dict]:
    answer = RULES.answer([{"role": "system", "content": system},
                           {"role": "user", "content": user}])
    return answer.kind, json.loads(answer.content)


def test_entities_are_names_and_codes_without_leading_function_words() -> None:
    kind, got = ask("You are an entity extraction specialist for unstructured text.",
                    "<TEXT>\nThe Orion budget is 40 thousand. Alice manages Orion.\n</TEXT>")
    assert kind == "graphiti.extract_entities"
    assert [e["name"] for e in got["extracted_entities"]] == ["Orion", "40", "Alice"]
    assert all(e["entity_type_id"] == 0 for e in got["extracted_entities"])


def test_facts_are_sentences_naming_two_listed_entities() -> None:
    entities = json.dumps([{"id": 0, "name": "Alice"}, {"id": 1, "name": "Orion"},
                           {"id": 2, "name": "Vega"}])
    kind, got = ask("You are an expert fact extractor that extracts fact triples from text.",
                    "<CURRENT_MESSAGE>\nAlice manages Orion. Vega is idle.\n"
                    f"</CURRENT_MESSAGE>\n\n<ENTITIES>\n{entities}\n</ENTITIES>\n")
    assert kind == "graphiti.extract_edges"
    assert [(e["source_entity_name"], e["target_entity_name"], e["fact"])
            for e in got["edges"]] == [("Alice", "Orion", "Alice manages Orion.")]


def test_resolution_and_summaries_change_nothing() -> None:
    assert ask("You are a fact deduplication assistant. x", "y")[1] == {
        "duplicate_facts": [], "contradicted_facts": []}
    assert ask("You are an entity deduplication assistant. x", "y")[1] == {
        "entity_resolutions": []}
    assert ask("You maintain detailed, information-dense entity memories from episode text.",
               "y") == ("graphiti.entity_summaries", {"summaries": []})
    assert ask("You are a helpful assistant that generates concise entity summaries from "
               "provided context.", "y") == ("graphiti.summaries", {
                   "summaries": [], "summary": "", "description": ""})
