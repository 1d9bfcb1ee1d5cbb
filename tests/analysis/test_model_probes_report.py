"""The scripted-model findings in the report (issue 37, part 3): every count is derived from
the recorded probe files (wire answers and model prompts), so changing the evidence changes
the counts, and the committed evidence's recomputed findings agree with what each probe
recorded when it ran. No backend, no server."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from fleetprobe.analysis import sections
from fleetprobe.analysis.base.section import Context
from fleetprobe.analysis.sections.backends import model_probes as mp

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "data" / mp.EVIDENCE


def _findings(directory: Path) -> dict[tuple[str, str], dict]:
    con = mp.load(directory)
    try:
        frame = con.execute("SELECT * FROM model_probe_findings").df()
    finally:
        con.close()
    return {(r["deployment"], r["finding"]): r for r in frame.to_dict("records")}


def _counts(directory: Path) -> dict[str, dict]:
    con = mp.load(directory)
    try:
        frame = con.execute("SELECT * FROM model_probe_verdict_counts").df()
    finally:
        con.close()
    return {r["deployment"]: r for r in frame.to_dict("records")}


def _rewrite(path: Path, edit) -> None:
    """Apply `edit` to every JSON line of a gzipped JSONL file, in place."""
    lines = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    path.write_bytes(gzip.compress(
        "".join(json.dumps(edit(line)) + "\n" for line in lines).encode()))


@pytest.fixture()
def evidence(tmp_path: Path) -> Path:
    if not COMMITTED.is_dir():
        pytest.skip("no committed model-probe evidence")
    copy = tmp_path / "model-probes" / COMMITTED.name
    shutil.copytree(COMMITTED, copy, ignore=shutil.ignore_patterns("runs"))
    return copy


def test_recomputed_findings_agree_with_what_each_probe_recorded(evidence: Path) -> None:
    recorded = {(d.name, f["probe"]): f["crossed"] for d in evidence.iterdir() if d.is_dir()
                for f in json.loads((d / "findings.json").read_text())}
    found = _findings(evidence)
    assert set(found) == set(recorded)
    for key, row in found.items():
        crossed = None if row["crossed"] is None or row["crossed"] != row["crossed"] \
            else bool(row["crossed"])
        assert crossed == recorded[key], key
        assert row["n"] >= 1 and row["verdict"], key
    # per deployment, the split adds up to the findings probed
    for deployment, row in _counts(evidence).items():
        parts = ("breaks_promise", "lacks_feature", "adapter_mapping", "unclassified",
                 "not_crossed", "not_applicable")
        assert sum(int(row[p]) for p in parts) == int(row["findings"]), deployment
        assert int(row["findings"]) == sum(1 for d, _ in recorded if d == deployment)


def test_the_counts_follow_the_wire_answers(evidence: Path) -> None:
    """mem0 1.0.11's UPDATE of a1's row is counted from the GET that shows it rewritten (and
    the write's answer naming it): show the row unchanged and name no change, and the finding
    is no longer crossed and the mapping's count drops by one."""
    key = ("mem0[infer,mem0-1.0.11]", "mem0.update_of_other_identity_row")
    before, counts = _findings(evidence)[key], _counts(evidence)[key[0]]
    assert (before["k"], before["n"], bool(before["crossed"])) == (1, 1, True)
    probes = evidence / key[0] / "probes.jsonl.gz"
    rows = [json.loads(line) for line in gzip.decompress(probes.read_bytes()).splitlines()]
    stored = next(r["answer"] for r in rows if r["probe"] == "mem0_update_decision"
                  and r["status"] == 201)

    def unchanged(line: dict) -> dict:
        if line["probe"] != "mem0_update_decision":
            return line
        if line["op"].startswith("GET /api/v1/memories/"):
            return {**line, "answer": {**line["answer"], **{k: stored[k] for k in (
                "content", "fleet_id", "visibility", "agent_id")}}}
        if line["status"] == 501:
            return {**line, "answer": {"detail": "mem0 stored nothing for this write"}}
        return line

    _rewrite(probes, unchanged)
    after = _findings(evidence)[key]
    assert (after["k"], bool(after["crossed"])) == (0, False)
    assert int(_counts(evidence)[key[0]]["adapter_mapping"]) == \
        int(counts["adapter_mapping"]) - 1


def test_the_counts_follow_the_model_prompts(evidence: Path) -> None:
    """CrewAI's strict-analysis prompt crossing is counted from the consolidation prompt that
    holds a1's private record: take the record out of the prompt and the measure drops."""
    deployment = "crewai[strict-analysis]"
    model = evidence / deployment / "model.jsonl.gz"
    con = mp.load(evidence)
    try:
        k = con.execute("SELECT k FROM model_probe_prompt_crossings WHERE deployment = ?",
                        [deployment]).fetchone()
    finally:
        con.close()
    assert k == (1,)

    def without_existing(line: dict) -> dict:
        if line.get("kind") != "crewai.consolidation":
            return line
        messages = [{**m, "content": m["content"].split("Existing similar memories:")[0]}
                    for m in line["messages"]]
        return {**line, "messages": messages}

    _rewrite(model, without_existing)
    con = mp.load(evidence)
    try:
        assert con.execute("SELECT k FROM model_probe_prompt_crossings WHERE deployment = ?",
                           [deployment]).fetchone() == (0,)
    finally:
        con.close()


def test_every_prompt_is_aligned_with_the_write_it_serves(evidence: Path) -> None:
    con = mp.load(evidence)
    try:
        bad = con.execute("SELECT deployment, seq, kind FROM mp_prompts "
                          "WHERE NOT coalesce(aligned, false)").fetchall()
        calls = con.execute("SELECT count(*) FROM mp_calls").fetchone()
        prompts = con.execute("SELECT count(*) FROM mp_prompts").fetchone()
    finally:
        con.close()
    assert bad == [] and calls == prompts


def test_section_is_registered_and_says_the_model_measures_nothing(evidence: Path,
                                                                  tmp_path: Path) -> None:
    assert sections.REGISTRY["model_probes"].module == "backends.model_probes"
    traces = evidence.parent.parent / "traces"
    traces.mkdir()
    output = mp.build(Context(traces, tmp_path / "out"))
    assert "measures nothing about language models" in output.sentence
    findings = output.tables["model_probe_findings"].frame
    assert len(findings) == 13 and not output.tables["model_probe_verdicts"].empty
    assert "measures nothing about language models" in \
        output.tables["model_probe_findings"].note
    assert set(findings.verdict) >= {"breaks its own promise (bug)",
                                     "follows from the adapter's mapping"}
    # without evidence the section says what to run
    empty = mp.build(Context(tmp_path / "none" / "traces", tmp_path / "out2"))
    assert empty.tables["model_probe_findings"].empty
