"""The scripted model's HTTP face: the OpenAI wire's chat completions and embeddings.

`POST /v1/chat/completions` answers from the rules (`rules.py`): as the message's content
(a JSON document when the request asks for `response_format` json_object or json_schema),
or as a tool call when the matched rule names a tool the request offers. `POST
/v1/embeddings` answers the kit's deterministic embedder (`backends/embedder.py`), as floats
or as base64 float32 (the OpenAI client asks for base64 by default). Every request and its
answer is one JSON line in the trace file, in the order answered; request headers (where an
API key travels) are never recorded. Nothing is sampled: the same request gets the same
bytes back, `created` is 0 and ids are digests of the request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from ..embedder import DIM, embed_texts
from .rules import RuleSet

MODEL_NAME = "fleetprobe-scripted"


class ModelTrace:
    """`model.jsonl`: one line per answered request, `seq` from 0 (None: record nothing)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._seq = 0
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, entry: dict[str, Any]) -> int:
        with self._lock:
            seq = self._seq
            self._seq += 1
            if self.path is not None:
                line = {"seq": seq, "ts": datetime.now(UTC).isoformat(), **entry}
                with self.path.open("a") as f:
                    f.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
            return seq


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()
                          ).hexdigest()[:24]


def _format_name(response_format: Any) -> str | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        return "json_schema:" + str((response_format.get("json_schema") or {}).get("name"))
    return str(response_format.get("type"))


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error",
                                   "code": None}}, status_code=status)


def create_app(rules: RuleSet, trace: ModelTrace) -> FastAPI:
    app = FastAPI(title="fleetprobe scripted model (OpenAI wire, rule-based)")

    @app.get("/health")
    @app.get("/api/v1/health")
    async def health() -> dict:
        return {"status": "ok", "model": MODEL_NAME, "rules": rules.source}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model",
                                            "created": 0, "owned_by": "fleetprobe"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = await request.json()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list")
        if body.get("stream"):
            return _error(400, "the scripted model does not stream")
        tools = body.get("tools") or None
        answer = rules.answer(messages, tools)
        message: dict[str, Any] = {"role": "assistant", "content": answer.content or None,
                                   "refusal": None}
        finish = "stop"
        if answer.tool_call is not None:
            message["tool_calls"] = [{
                "id": "call_" + _digest([messages, answer.tool_call["name"]]),
                "type": "function",
                "function": {"name": answer.tool_call["name"],
                             "arguments": json.dumps(answer.tool_call["arguments"])}}]
            finish = "tool_calls"
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
        completion_tokens = len((answer.content or "").split())
        trace.record({
            "endpoint": "chat.completions", "kind": answer.kind,
            "model": body.get("model"),
            "response_format": _format_name(body.get("response_format")),
            "tools": [(t.get("function") or {}).get("name") for t in tools or ()],
            "messages": messages, "answer": answer.content,
            "tool_call": answer.tool_call})
        return {"id": "chatcmpl-" + _digest([messages, body.get("response_format"), tools]),
                "object": "chat.completion", "created": 0,
                "model": body.get("model") or MODEL_NAME,
                "choices": [{"index": 0, "message": message, "finish_reason": finish,
                             "logprobs": None}],
                "usage": {"prompt_tokens": prompt_tokens,
                          "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> Any:
        body = await request.json()
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return _error(400, "input must be a string or a list of strings (token arrays "
                               "are not supported)")
        dims = body.get("dimensions")
        if dims is not None and dims != DIM:
            return _error(400, f"the scripted embedder has {DIM} dimensions, not {dims}")
        vectors = embed_texts(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": (base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
                               if as_base64 else v)}
                for i, v in enumerate(vectors)]
        trace.record({"endpoint": "embeddings", "kind": "embedding",
                      "model": body.get("model"), "inputs": texts,
                      "vectors_sha256": [_digest(v) for v in vectors], "dimensions": DIM})
        tokens = sum(len(t.split()) for t in texts)
        return {"object": "list", "data": data, "model": body.get("model") or MODEL_NAME,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    return app
