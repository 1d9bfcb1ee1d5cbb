"""What crosses a scope on a backend's model-mediated paths, run against the scripted model.

    python -m fleetprobe.backends.model_probes --out DIR [--only mem0|crewai]

Each probe starts the adapter under a model deployment (mem0 `infer`, CrewAI `analysis` /
`strict-analysis`; `BackendServer` starts the scripted model), writes a few rows through
MemClaw's wire in a fresh tenant (the tenant key, writing as the body's `agent_id`), and
judges from what came back and from the model's own trace whether something crossed a scope:
a row of another fleet, agent or visibility in the model's prompt, a write suppressed or
merged by a row of another scope, a private row changed by another agent's write. Per
deployment, `DIR/<label>/` holds `probes.jsonl` (every wire request and answer), `model.jsonl`
(every prompt and answer of the scripted model) and `findings.json`; `DIR/manifest.json`
names versions and the rules' digest. The scripted model's answers are rules
(`scripted_model/rules.yaml`): a finding says what the backend does with such an answer, and
nothing about what a language model would answer (docs/scripted-model.md).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from .process import BackendServer
from .scripted_model.rules import RULES_FILE, section

# long sentences that differ in one word: near-duplicates for the kit's word-hash embedder
# (CrewAI consolidates at a 0.85 score, 1/(1 + squared L2), about cosine 0.91)
NEAR = ("The billing database password for the eu cluster rotates every Monday at {t} and "
        "the new value is kept in the team vault next to the runbook.")


@dataclass
class Finding:
    probe: str
    question: str
    crossed: bool | None  # None: the path does not exist in this version (not applicable)
    evidence: dict[str, Any] = field(default_factory=dict)


class Session:
    """One adapter under one deployment, a fresh tenant per probe, every request logged."""

    def __init__(self, server: BackendServer, out: Path) -> None:
        self.server = server
        self.log = (out / "probes.jsonl").open("a")
        self.model_trace = out / "model.jsonl"
        self.probe = ""
        self.seq = 0

    def fresh(self, probe: str) -> None:
        self.probe = probe
        self.tenant, key = self.server.create_tenant()
        self.http = httpx.Client(base_url=self.server.base_url + "/api/v1", timeout=300,
                                 headers={"X-API-Key": key})

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        r = self.http.request(method, path, **kw)
        self.log.write(json.dumps({
            "seq": self.seq, "probe": self.probe, "op": f"{method} /api/v1{path}",
            "status": r.status_code, "request": kw.get("json") or kw.get("params"),
            "answer": r.json() if r.content else None}, sort_keys=True) + "\n")
        self.log.flush()
        self.seq += 1
        return r

    def write(self, content: str, agent: str | None, fleet: str,
              visibility: str = "scope_team") -> httpx.Response:
        body = {"tenant_id": self.tenant, "fleet_id": fleet, "content": content,
                "visibility": visibility}
        return self._call("POST", "/memories", json=body | ({"agent_id": agent} if agent else {}))

    def rows(self, fleet: str | None = None) -> list[dict[str, Any]]:
        params = {"tenant_id": self.tenant, "limit": 100} | ({"fleet_id": fleet} if fleet else {})
        return self._call("GET", "/memories", params=params).json()["items"]

    def model_calls(self, since: int, kind: str | None = None) -> list[dict[str, Any]]:
        lines = self.model_trace.read_text().splitlines() if self.model_trace.exists() else []
        calls = [json.loads(line) for line in lines[since:]]
        return [c for c in calls if kind is None or c.get("kind") == kind]

    def mark(self) -> int:
        return len(self.model_trace.read_text().splitlines()) if self.model_trace.exists() else 0


def _prompt(call: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in call.get("messages") or [])


def _retrieving(s: Session, mark: int) -> list[dict[str, Any]]:
    """The model calls since `mark` that carry the memories mem0 retrieved for the write:
    2.x's one extraction prompt, 1.x's update decision."""
    return [c for c in s.model_calls(mark)
            if c.get("kind") in ("mem0.additive_extraction", "mem0.update_decision")]


def _user(call: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in call.get("messages") or []
                     if m.get("role") == "user")


# --- mem0 (infer=True) ----------------------------------------------------------------------

def mem0_prompt_other_fleet(s: Session) -> Finding:
    secret = "Agent one keeps the incident bridge code 4471 in its private notes."
    s.write(secret, "a1", "f1", "scope_agent")
    mark = s.mark()
    s.write("The eu deploy freeze starts on Friday evening.", "a1", "f2")
    calls = _retrieving(s, mark)
    seen = any("4471" in _prompt(c) for c in calls)
    return Finding("mem0.prompt_holds_other_fleet_private_row",
                   "Does the extraction prompt for a write into fleet f2 carry the writer's "
                   "agent-private row of fleet f1 (mem0 retrieves by user_id/agent_id only)?",
                   seen, {"prompts_with_retrieved_memories": len(calls),
                          "prompt_sections_with_row": [
                              sec for c in calls for sec in ("Existing Memories",
                                                             "Last k Messages")
                              if "4471" in section(_user(c), f"## {sec}\n", "\n## ")]})


def mem0_prompt_other_agent(s: Session) -> Finding:
    s.write("Agent one keeps the incident bridge code 4471 in its private notes.", "a1",
            "f1", "scope_agent")
    mark = s.mark()
    s.write("The eu deploy freeze starts on Friday evening.", "a2", "f1")
    s.write("The us deploy freeze starts on Thursday evening.", None, "f1")
    calls = _retrieving(s, mark)
    by_writer = {"a2": "4471" in _prompt(calls[0]) if calls else None,
                 "tenant key, no agent_id": "4471" in _prompt(calls[1])
                 if len(calls) > 1 else None}
    return Finding("mem0.prompt_holds_other_agent_private_row",
                   "Does the extraction prompt of another writer carry agent a1's private "
                   "row (another agent of the same fleet; a tenant-key write naming no agent)?",
                   any(bool(v) for v in by_writer.values()), {"row_in_prompt_of": by_writer})


def mem0_same_fact_two_fleets(s: Session) -> Finding:
    fact = "The payments cluster uses the blue load balancer pool."
    first = s.write(fact, "a1", "f1")
    mark = s.mark()
    second = s.write(fact, "a1", "f2")
    in_f1, in_f2 = ([r["content"] for r in s.rows(f)] for f in ("f1", "f2"))
    answers = [c["answer"] for c in _retrieving(s, mark)]
    return Finding("mem0.same_fact_in_another_fleet",
                   "When the writer of a row in fleet f1 writes the same fact into fleet f2, "
                   "does f2 get a row of its own with f1's left as it was (mem0 retrieves "
                   "the writer's memories of every fleet)?",
                   second.status_code != 201 or fact not in in_f1 or fact not in in_f2,
                   {"first_status": first.status_code, "second_status": second.status_code,
                    "second_answer": second.json().get("error", {}).get("message")
                    if second.status_code != 201 else None,
                    "rows_in_f1_after": in_f1, "rows_in_f2_after": in_f2,
                    "model_answers": answers})


def _decision(s: Session, probe: str, question: str, newer: str) -> Finding:
    """Agent a1's private row in fleet f1, then a write naming no agent (tenant key) into
    fleet f2 of a fact about the same subject: what does the model's decision do to a1's
    row?"""
    first = s.write("The staging database runs on host db-7 in rack four.", "a1", "f1",
                    "scope_agent").json()
    mark = s.mark()
    second = s.write(newer, None, "f2")
    kinds = sorted({c["kind"] for c in s.model_calls(mark) if c["endpoint"] != "embeddings"})
    after = s._call("GET", f"/memories/{first.get('id')}")
    row = after.json() if after.status_code == 200 else None
    decision = "mem0.update_decision" in kinds
    changed = row is None or row.get("content") != first.get("content")
    return Finding(probe, question, changed if decision else None, {
        "model_prompt_kinds": kinds, "write_status": second.status_code,
        "write_answer": second.json().get("error", {}).get("message")
        if second.status_code != 201 else second.json().get("content"),
        "a1_row_before": {k: first.get(k) for k in ("content", "fleet_id", "visibility",
                                                    "agent_id")},
        "a1_row_after": {k: row.get(k) for k in ("content", "fleet_id", "visibility",
                                                 "agent_id")} if row else None,
        "note": None if decision else "no update decision was asked for: this mem0 runs an "
        "ADD-only extraction (no UPDATE/DELETE path)"})


def mem0_update_decision(s: Session) -> Finding:
    return _decision(s, "mem0.update_of_other_identity_row",
                     "Does a write naming no agent (tenant key) into fleet f2 update agent "
                     "a1's private row of fleet f1 through the model's UPDATE decision?",
                     "The staging database runs on host db-9 in rack four.")


def mem0_delete_decision(s: Session) -> Finding:
    return _decision(s, "mem0.delete_of_other_identity_row",
                     "Does a write naming no agent (tenant key) into fleet f2 delete agent "
                     "a1's private row of fleet f1 through the model's DELETE decision?",
                     "The staging database no longer runs on host db-7 in rack four.")


# --- CrewAI (save analysis, consolidation) --------------------------------------------------

def crewai_consolidation_private(s: Session) -> Finding:
    first = s.write(NEAR.format(t="noon"), "a1", "f1", "scope_agent").json()
    mark = s.mark()
    second = s.write(NEAR.format(t="dawn"), "a2", "f1").json()
    rows = {r["id"]: r for r in s.rows("f1")}
    kept = rows.get(first.get("id"), {})
    meta = kept.get("metadata") or {}
    consolidations = s.model_calls(mark, "crewai.consolidation")
    return Finding("crewai.consolidation_merges_into_other_agents_private_row",
                   "Does agent a2's write merge into agent a1's private record of the same "
                   "fleet (consolidation searches without `source`), and what is the record "
                   "afterwards?",
                   bool(consolidations) and "dawn" in kept.get("content", ""),
                   {"a1_row_before": {"private": (first.get("metadata") or {}).get(
                       "crewai_private"), "source": (first.get("metadata") or {}).get(
                       "crewai_source")},
                    "a1_row_after": {"private": meta.get("crewai_private"),
                                     "source": meta.get("crewai_source"),
                                     "content": kept.get("content")},
                    "a2_write_answered_id": second.get("id"),
                    "a2_write_answered_a1_row": second.get("id") == first.get("id"),
                    "a1_row_in_a2_prompt": any("noon" in _prompt(c) for c in consolidations),
                    "rows_in_f1": len(rows)})


def crewai_consolidation_fleets(s: Session) -> Finding:
    first = s.write(NEAR.format(t="noon"), "a1", "ops-eu").json()
    mark = s.mark()
    second = s.write(NEAR.format(t="dawn"), "a2", "ops").json()
    consolidations = s.model_calls(mark, "crewai.consolidation")
    in_ops_eu = [r["content"] for r in s.rows("ops-eu")]
    return Finding("crewai.consolidation_merges_rows_of_two_fleets",
                   "Does a write into fleet `ops` merge into a row of fleet `ops-eu` (the "
                   "consolidation search reads the root scope as a string prefix)?",
                   any("dawn" in c for c in in_ops_eu),
                   {"ops_eu_rows_after": in_ops_eu,
                    "ops_write_answered_id": second.get("id"),
                    "ops_eu_row_id": first.get("id"),
                    "ops_rows_after": [r["content"] for r in s.rows("ops")],
                    "ops_eu_row_in_prompt": any("noon" in _prompt(c) for c in consolidations)})


def crewai_inferred_scope(s: Session) -> Finding:
    s.write("Crew f1 agent a1 tracks the canary rollout.", "a1", "f1", "scope_agent")
    mark = s.mark()
    answer = s.write("Crew f1 agent notes: the canary rollout reached half the fleet.",
                     "a2", "f1").json()
    analyses = s.model_calls(mark, "crewai.save_analysis")
    suggested = [json.loads(c["answer"]).get("suggested_scope") for c in analyses]
    offered = [_prompt(c).split("Existing scopes: ", 1)[-1].split("\n", 1)[0]
               for c in analyses]
    scope = (answer.get("metadata") or {}).get("crewai_scope") or ""
    root = f"/{s.tenant}/crew/f1"
    return Finding("crewai.model_inferred_scope",
                   "Where does a row land when the save analysis picks its scope, and can "
                   "the model's choice leave the root CrewAI joins it to?",
                   not scope.startswith(root + "/") and scope != root,
                   {"scopes_offered": offered, "model_suggested": suggested,
                    "resolved_scope": scope, "root_scope": root})


MEM0 = (mem0_prompt_other_fleet, mem0_prompt_other_agent, mem0_same_fact_two_fleets,
        mem0_update_decision, mem0_delete_decision)
# (backend, deployment, environment, probes): mem0 as locked (2.2.1, ADD-only extraction)
# and its last 1.x release (1.0.11, the ADD/UPDATE/DELETE decision over retrieved memories)
PLAN: tuple[tuple[str, str, str, tuple[Callable[[Session], Finding], ...]], ...] = (
    ("mem0", "infer", "mem0", MEM0),
    ("mem0", "infer", "mem0-1.0.11", MEM0),
    ("crewai", "strict-analysis", "crewai", (crewai_consolidation_private,)),
    ("crewai", "analysis", "crewai", (crewai_consolidation_fleets, crewai_inferred_scope)),
)


def run(out: Path, only: str | None = None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(),
        "git_commit": _commit(),
        "rules_sha256": hashlib.sha256(RULES_FILE.read_bytes()).hexdigest(),
        "model": "the kit's scripted model (rules, not a language model): a finding says "
                 "what the backend does with the rules' answers and nothing about what a "
                 "language model would answer",
        "deployments": {}}
    for backend, deployment, env, probes in PLAN:
        if only and backend != only:
            continue
        label = f"{backend}[{deployment}" + (f",{env}]" if env != backend else "]")
        where = out / label
        where.mkdir(exist_ok=True)
        with BackendServer(backend, deployment=deployment, backend_env=env,
                           model_trace=where / "model.jsonl") as server:
            version = httpx.get(server.base_url + "/api/v1/version", timeout=30).json()
            session = Session(server, where)
            findings = []
            for probe in probes:
                session.fresh(probe.__name__)
                findings.append(asdict(probe(session)))
            session.log.close()
        (where / "findings.json").write_text(json.dumps(findings, indent=1) + "\n")
        manifest["deployments"][label] = {
            "backend_version": version.get("backend_version"),
            "backend_env": version.get("backend_env"),
            "outbound_refused": (version.get("network") or {}).get("outbound_refused"),
            "findings": {f["probe"]: f["crossed"] for f in findings}}
    manifest["finished"] = datetime.now(UTC).isoformat()
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def pack(out: Path) -> None:
    """Gzip each JSONL file for committing, as committed events are (no file name, mtime 0:
    the same lines give the same bytes); mem0's extraction prompt repeats in every call."""
    for path in sorted(out.rglob("*.jsonl")):
        with path.open("rb") as src, (path.with_suffix(".jsonl.gz")).open("wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as dst:
            dst.write(src.read())
        path.unlink()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fleetprobe.backends.model_probes")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", choices=["mem0", "crewai"], default=None)
    p.add_argument("--gzip", action="store_true", help="gzip the JSONL files (to commit)")
    args = p.parse_args(argv)
    manifest = run(args.out, args.only)
    if args.gzip:
        pack(args.out)
    print(json.dumps({k: v["findings"] for k, v in manifest["deployments"].items()},
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
