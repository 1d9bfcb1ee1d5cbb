"""A deterministic, rule-based model on loopback, speaking the OpenAI wire (docs/scripted-model.md).

It stands in for a language model so that a memory backend's model-mediated paths (mem0's
`infer=True` extraction, CrewAI Memory's save analysis and consolidation) run offline and
reproducibly: `rules.yaml` says, per prompt kind, how an answer is built from the prompt;
`app` serves `/v1/chat/completions` and `/v1/embeddings`; `process.ScriptedModelServer`
runs it as a child process. It measures nothing about language models.
"""

from __future__ import annotations

MODEL_URL_ENV = "FLEETPROBE_MODEL_URL"  # the adapter reads the base URL (".../v1") from it
