"""What crosses a scope on the backends' model-mediated paths (issue 37, part 3), from the
recorded scripted-model probes (data/model-probes/<id>/, lib/fleetprobe/backends/model_probes.py):
mem0 with `infer=True` (2.2.1, and 1.0.11's update decision) and CrewAI Memory with its LLM
analysis and consolidation on.

Every count is a query over the recorded files, loaded into DuckDB: `probes.jsonl` (each wire
request and answer), `model.jsonl` (each prompt and answer of the scripted model) and
`findings.json` (what the probe judged when it ran), one SQL view per measure (VIEWS). Each
finding's `crossed` is recomputed from the wire answers and the prompts by the evidence its
catalogue entry names, and shown beside what the probe recorded. Verdicts split like the
matrix's (backend_promises_catalogue.yaml): breaks its own promise / lacks the feature /
follows from the adapter's mapping (model_probes_catalogue.yaml says which and why).

The scripted model measures nothing about language models (the section says so first)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd

from fleetprobe.analysis.base.catalogues import catalogue
from fleetprobe.analysis.base.section import Context, SectionOutput, from_parts
from fleetprobe.analysis.base.tables import Table

KEY, TITLE = "model_probes", "Backends: what crosses a scope on the model's paths"
EXPERIMENTS: tuple[str, ...] = ()  # reads no run: the model-probe files below
# the committed probe run, under the traces root's parent (data/); a new run is a new folder
EVIDENCE = Path("model-probes") / "20261205T053548Z"
CATALOGUE = catalogue("model_probes")
PROMISES = catalogue("backend_promises")
NO_EVIDENCE = ("no model-probe evidence: run `python -m fleetprobe.backends.model_probes --out "
               f"data/{EVIDENCE.as_posix()} --gzip` (docs/scripted-model.md)")

# One view per measure, over the tables `load` makes (mp_wire_raw, mp_model_raw,
# mp_recorded, mp_kinds, mp_catalogue).
VIEWS: dict[str, str] = {
    # every wire request and answer of the probes
    "mp_wire": """
SELECT deployment, CAST(json->>'seq' AS INTEGER) AS seq, json->>'probe' AS probe,
       json->>'op' AS op, CAST(json->>'status' AS INTEGER) AS status,
       json->'request' AS request, json->'answer' AS answer
FROM mp_wire_raw""",
    # every write: its scope as requested (an absent agent: a tenant-key write naming none)
    "mp_writes": """
SELECT deployment, seq, probe, status, request->>'content' AS content,
       request->>'fleet_id' AS fleet, coalesce(request->>'agent_id', '') AS agent,
       request->>'visibility' AS visibility, answer->>'id' AS row_id, answer,
       row_number() OVER (PARTITION BY deployment ORDER BY seq) AS write_no
FROM mp_wire WHERE op = 'POST /api/v1/memories'""",
    # the rows the probes stored: a write answered 201 with an id no earlier answer had
    "mp_rows": """
SELECT w.* FROM mp_writes w
WHERE w.status = 201 AND NOT EXISTS (
    SELECT 1 FROM mp_writes e WHERE e.deployment = w.deployment AND e.row_id = w.row_id
                                AND e.seq < w.seq)""",
    # every chat prompt, its text, its kind's rule and the input it carries
    "mp_calls": """
SELECT m.deployment, CAST(m.json->>'seq' AS INTEGER) AS seq, m.json->>'kind' AS kind,
       array_to_string(list_transform(CAST(m.json->'messages' AS JSON[]),
                                      lambda x: json_extract_string(x, '$.content')),
                       chr(10)) AS prompt,
       k.opens_write
FROM mp_model_raw m LEFT JOIN mp_kinds k ON k.kind = m.json->>'kind'
WHERE m.json->>'endpoint' = 'chat.completions'""",
    # each chat prompt with the write it serves (catalogue `prompt_kinds`) and whether the
    # prompt's input is that write's content (`aligned`)
    "mp_prompts": """
WITH calls AS (
    SELECT c.*, regexp_extract(c.prompt, k.input, 1) AS input FROM mp_calls c
    JOIN mp_kinds k ON k.kind = c.kind
), opening AS (
    SELECT *, row_number() OVER (PARTITION BY deployment ORDER BY seq) AS write_no
    FROM calls WHERE opens_write
), following AS (
    SELECT *, row_number() OVER (PARTITION BY deployment, kind, input ORDER BY seq) AS nth
    FROM calls WHERE NOT opens_write
), by_content AS (
    SELECT *, row_number() OVER (PARTITION BY deployment, content ORDER BY seq) AS nth
    FROM mp_writes
)
SELECT o.deployment, o.seq, o.kind, o.prompt, o.input, w.seq AS write_seq, w.probe,
       w.fleet, w.agent, w.content, o.input = w.content AS aligned
FROM opening o LEFT JOIN mp_writes w ON w.deployment = o.deployment AND w.write_no = o.write_no
UNION ALL
SELECT f.deployment, f.seq, f.kind, f.prompt, f.input, w.seq, w.probe, w.fleet, w.agent,
       w.content, w.seq IS NOT NULL
FROM following f LEFT JOIN by_content w ON w.deployment = f.deployment
                                       AND w.content = f.input AND w.nth = f.nth""",
    # measure `prompt`: prompts holding a row of another scope of the same probe
    "model_probe_prompt_crossings": """
SELECT p.deployment, p.probe, count(*) AS n, count(*) FILTER (WHERE EXISTS (
    SELECT 1 FROM mp_rows r
    WHERE r.deployment = p.deployment AND r.probe = p.probe AND r.seq < p.write_seq
      AND r.content <> p.content AND contains(p.prompt, r.content)
      AND (r.fleet <> p.fleet OR (r.visibility = 'scope_agent' AND r.agent <> p.agent))))
    AS k
FROM mp_prompts p GROUP BY p.deployment, p.probe""",
    # every later state of a row the wire showed: a listing's items, a GET or write answer
    "mp_states": """
SELECT deployment, probe, seq, item->>'id' AS row_id, item AS state FROM (
    SELECT *, unnest(CASE WHEN op = 'GET /api/v1/memories'
                          THEN CAST(answer->'items' AS JSON[])
                          WHEN status IN (200, 201) THEN [answer] ELSE [] END) AS item
    FROM mp_wire)""",
    # measure `row_change`: rows rewritten, deleted, merged into or named as changed by the
    # model's decision after a write of another scope
    "model_probe_row_changes": """
SELECT r.deployment, r.probe, count(*) AS n, count(*) FILTER (WHERE (
    EXISTS (SELECT 1 FROM mp_states s
            WHERE s.deployment = r.deployment AND s.row_id = r.row_id AND s.seq > r.seq
              AND (s.state->>'content' IS DISTINCT FROM r.answer->>'content'
                   OR s.state->>'fleet_id' IS DISTINCT FROM r.answer->>'fleet_id'
                   OR s.state->>'visibility' IS DISTINCT FROM r.answer->>'visibility'
                   OR s.state->>'agent_id' IS DISTINCT FROM r.answer->>'agent_id'
                   OR s.state->'metadata'->>'crewai_private'
                      IS DISTINCT FROM r.answer->'metadata'->>'crewai_private'
                   OR s.state->'metadata'->>'crewai_source'
                      IS DISTINCT FROM r.answer->'metadata'->>'crewai_source'))
    OR EXISTS (SELECT 1 FROM mp_wire g
               WHERE g.deployment = r.deployment AND g.seq > r.seq AND g.status = 404
                 AND g.op = 'GET /api/v1/memories/' || r.row_id)
    OR EXISTS (SELECT 1 FROM mp_wire d
               WHERE d.deployment = r.deployment AND d.seq > r.seq AND d.status = 501
                 AND list_contains(regexp_extract_all(d.answer->>'detail',
                                                      '(?:UPDATE|DELETE) ([0-9a-f-]+)', 1),
                                   r.row_id)))
    AND EXISTS (SELECT 1 FROM mp_writes o
                WHERE o.deployment = r.deployment AND o.probe = r.probe AND o.seq > r.seq
                  AND (o.fleet <> r.fleet OR o.agent <> r.agent))) AS k
FROM mp_rows r GROUP BY r.deployment, r.probe""",
    # measure `suppressed`: writes that stored no row of their own while a row of another
    # fleet holds their content
    "model_probe_suppressed_writes": """
SELECT w.deployment, w.probe, count(*) AS n, count(*) FILTER (WHERE w.status <> 201 AND EXISTS (
    SELECT 1 FROM mp_rows r WHERE r.deployment = w.deployment AND r.probe = w.probe
                              AND r.content = w.content AND r.fleet <> w.fleet)) AS k
FROM mp_writes w GROUP BY w.deployment, w.probe""",
    # measure `outside`: rows at a CrewAI scope outside the fleet the write named
    "model_probe_scope_outside": """
SELECT w.deployment, w.probe, count(*) AS n, count(*) FILTER (WHERE NOT (
    w.answer->'metadata'->>'crewai_scope' LIKE '%/' || w.fleet
    OR w.answer->'metadata'->>'crewai_scope' LIKE '%/' || w.fleet || '/%')) AS k
FROM mp_writes w WHERE w.status = 201 AND w.answer->'metadata'->>'crewai_scope' IS NOT NULL
GROUP BY w.deployment, w.probe""",
    # every measure side by side, per deployment and probe (k of n each)
    "model_probe_evidence": """
SELECT p.deployment, p.probe, p.k AS prompt_k, p.n AS prompt_n, r.k AS row_change_k,
       r.n AS row_change_n, s.k AS suppressed_k, s.n AS suppressed_n, o.k AS outside_k,
       o.n AS outside_n
FROM model_probe_suppressed_writes s
LEFT JOIN model_probe_prompt_crossings p USING (deployment, probe)
LEFT JOIN model_probe_row_changes r USING (deployment, probe)
LEFT JOIN model_probe_scope_outside o USING (deployment, probe)""",
    # one row per recorded finding: its evidence k of n, recomputed crossed, the probe's own
    # judgement, and the verdict its catalogue entry gives a crossing
    "model_probe_findings": """
WITH evidence AS (
    SELECT 'prompt' AS evidence, * FROM model_probe_prompt_crossings
    UNION ALL SELECT 'row_change', * FROM model_probe_row_changes
    UNION ALL SELECT 'suppressed', * FROM model_probe_suppressed_writes
    UNION ALL SELECT 'outside', * FROM model_probe_scope_outside
), kinds AS (SELECT DISTINCT deployment, kind FROM mp_calls)
SELECT f.deployment, f.finding, c.probe, f.question, c.evidence,
       coalesce(e.k, 0) AS k, coalesce(e.n, 0) AS n,
       CASE WHEN c.requires_kind IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM kinds WHERE kinds.deployment = f.deployment
                                      AND kinds.kind = c.requires_kind) THEN NULL
            ELSE coalesce(e.k, 0) > 0 END AS crossed,
       f.recorded, c.verdict, c.ref, c.why
FROM mp_recorded f LEFT JOIN mp_catalogue c ON c.finding = f.finding
LEFT JOIN evidence e ON e.deployment = f.deployment AND e.probe = c.probe
                    AND e.evidence = c.evidence""",
    # per deployment: findings crossed, split by verdict, and those not crossed or without
    # the path
    "model_probe_verdict_counts": """
SELECT deployment, count(*) AS findings,
       count(*) FILTER (WHERE crossed AND verdict = 'breaks_promise') AS breaks_promise,
       count(*) FILTER (WHERE crossed AND verdict = 'lacks_feature') AS lacks_feature,
       count(*) FILTER (WHERE crossed AND verdict = 'adapter_mapping') AS adapter_mapping,
       count(*) FILTER (WHERE crossed AND verdict NOT IN
                        ('breaks_promise', 'lacks_feature', 'adapter_mapping')) AS unclassified,
       count(*) FILTER (WHERE crossed = false) AS not_crossed,
       count(*) FILTER (WHERE crossed IS NULL) AS not_applicable
FROM model_probe_findings GROUP BY deployment""",
}


def _glob(directory: Path, name: str) -> str:
    return (directory / "*" / name).as_posix().replace("'", "''")


def load(directory: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding one probe run's recorded files and every view of VIEWS."""
    con = duckdb.connect()
    deployment = "regexp_extract(filename, '([^/\\\\]+)[/\\\\][^/\\\\]+$', 1)"
    con.execute(f"CREATE TABLE mp_wire_raw AS SELECT {deployment} AS deployment, json "
                f"FROM read_ndjson_objects('{_glob(directory, 'probes.jsonl*')}', "
                "filename=true)")
    con.execute(f"CREATE TABLE mp_model_raw AS SELECT {deployment} AS deployment, json "
                f"FROM read_ndjson_objects('{_glob(directory, 'model.jsonl*')}', "
                "filename=true)")
    con.execute(f"CREATE TABLE mp_recorded AS SELECT {deployment} AS deployment, "
                "json->>'probe' AS finding, json->>'question' AS question, "
                "TRY_CAST(json->>'crossed' AS BOOLEAN) AS recorded "
                f"FROM read_json_objects('{_glob(directory, 'findings.json')}', "
                "filename=true, format='array')")
    kinds = pd.DataFrame([{"kind": k, "opens_write": bool(v["opens_write"]),
                           "input": v["input"]} for k, v in CATALOGUE["prompt_kinds"].items()])
    entries = pd.DataFrame([{"finding": k, "probe": v["probe"], "evidence": v["evidence"],
                             "requires_kind": v.get("requires_kind"), "verdict": v["verdict"],
                             "ref": v["ref"], "why": " ".join(v["why"].split())}
                            for k, v in CATALOGUE["findings"].items()])
    con.register("mp_kinds_df", kinds)
    con.register("mp_catalogue_df", entries)
    con.execute("CREATE TABLE mp_kinds AS SELECT * FROM mp_kinds_df")
    con.execute("CREATE TABLE mp_catalogue AS SELECT * FROM mp_catalogue_df")
    for name, sql in VIEWS.items():
        con.execute(f'CREATE VIEW "{name}" AS {sql}')
    return con


def basis(ref: str) -> str:
    """The promises catalogue's text a verdict rests on (`promise:<backend>`,
    `features.<key>`, `mappings.<key>`)."""
    if ref.startswith("promise:"):
        entry = PROMISES["backends"].get(ref.split(":", 1)[1], {})
        return f"its own promise: {' '.join(str(entry.get('promise', '?')).split())}"
    group, _, key = ref.partition(".")
    return str((PROMISES.get(group) or {}).get(key, ref))


def versions(directory: Path) -> dict[str, str]:
    """deployment -> `<backend package> <version>`, from the probe run's manifest."""
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return {label: f"{label.split('[')[0]} {d.get('backend_version') or '?'}"
            for label, d in (manifest.get("deployments") or {}).items()}


def _crossed(value: object) -> bool | None:
    """A nullable boolean as read back from DuckDB (None, NaN or pd.NA: not applicable)."""
    return None if pd.isna(value) else bool(value)


def _shown(value: object) -> str:
    crossed = _crossed(value)
    return "n/a (no such path)" if crossed is None else (
        "crossed" if crossed else "not crossed")


def _evidence_table(evidence: pd.DataFrame, source: str) -> Table:
    """Every measure per deployment and probe, `k/n` (`-`: no such rows in the probe)."""
    frame = evidence[["deployment", "probe"]].copy()
    for key in CATALOGUE["evidence"]:
        frame[key] = [f"{int(k)}/{int(n)}" if not pd.isna(n) else "-"
                      for k, n in zip(evidence[f"{key}_k"], evidence[f"{key}_n"], strict=True)]
    return Table("model_probe_evidence", "Scripted-model probes: every measure per "
                 "deployment and probe", frame,
                 "k/n per measure, from the recorded wire answers and prompts of " + source +
                 ": " + "; ".join(f"`{k}` = {' '.join(v['text'].split())}"
                                  for k, v in CATALOGUE["evidence"].items()) +
                 ". A finding is decided by one of them (model_probe_findings); a crossing "
                 "another measure shows is here too.")


def tables(directory: Path) -> tuple[Table, Table, Table]:
    """model_probe_findings (one row per finding), model_probe_verdicts (per deployment,
    the findings crossed split by verdict) and model_probe_evidence (every measure)."""
    names = ("model_probe_findings", "model_probe_verdicts", "model_probe_evidence")
    titles = ("Scripted-model probes: each finding with its evidence, basis and verdict",
              "Scripted-model probes: findings per deployment, bugs apart from missing "
              "features and the adapter's mapping",
              "Scripted-model probes: every measure per deployment and probe")
    if not (directory / "manifest.json").is_file():
        return tuple(Table(n, t, pd.DataFrame(), NO_EVIDENCE)  # type: ignore[return-value]
                     for n, t in zip(names, titles, strict=True))
    con = load(directory)
    try:
        findings = con.execute("SELECT * FROM model_probe_findings "
                               "ORDER BY deployment, finding").df()
        counts = con.execute("SELECT * FROM model_probe_verdict_counts "
                             "ORDER BY deployment").df()
        evidence = con.execute("SELECT * FROM model_probe_evidence "
                               "ORDER BY deployment, probe").df()
    finally:
        con.close()
    version = versions(directory)
    verdicts = {**PROMISES["verdicts"], "none": "no crossing to judge"}
    frame = pd.DataFrame({
        "deployment": findings.deployment,
        "version": findings.deployment.map(version),
        "finding": findings.finding, "probe": findings.probe,
        "evidence": [f"{k} of {n}: {CATALOGUE['evidence'][e]['short']}"
                     for k, n, e in zip(findings.k, findings.n, findings.evidence,
                                        strict=True)],
        "crossed": findings.crossed.map(_shown),
        "recorded by the probe": findings.recorded.map(_shown),
        "verdict": [verdicts.get(v, v) if _crossed(c) else "-"
                    for v, c in zip(findings.verdict, findings.crossed, strict=True)],
        "basis": [f"{basis(r)} -- here: {w}" for r, w in zip(findings.ref, findings.why,
                                                            strict=True)]})
    counts.insert(1, "version", counts.deployment.map(version))
    counts = counts.rename(columns={k: verdicts[k] for k in
                                    ("breaks_promise", "lacks_feature", "adapter_mapping",
                                     "unclassified")})
    statement = " ".join(CATALOGUE["statement"].split())
    source = f"data/{directory.parent.name}/{directory.name}"
    note = (f"{statement} From the recorded files of {source} (probes.jsonl: wire requests "
            "and answers; model.jsonl: the model's prompts and answers; findings.json: what "
            "each probe judged), one SQL view per measure "
            "(lib/fleetprobe/analysis/sections/backends/model_probes.py). n = one probe run per "
            "finding and deployment; `evidence` = k of n of the measure the finding's entry in "
            "model_probes_catalogue.yaml names; `crossed` is recomputed from it (n/a: the "
            "deployment's model was never asked the prompt the path needs), `recorded by the "
            "probe` is findings.json. Verdicts as backend_promises_catalogue.yaml's: only a "
            "crossing the backend's own documented scoping excludes is a bug.")
    return (Table(names[0], titles[0], frame, note),
            Table(names[1], titles[1], counts,
                  f"{statement} Per deployment: the findings probed (n), those crossed split "
                  "by verdict, those not crossed and those whose path the version does not "
                  f"have, from model_probe_findings over {source}."),
            _evidence_table(evidence, source))


def build(context: Context) -> SectionOutput:
    directory = Path(context.traces_root).parent / EVIDENCE
    found, verdicts, evidence = tables(directory)
    return from_parts(
        KEY, TITLE,
        " ".join(CATALOGUE["statement"].split()) + " mem0 with infer=True (2.2.1 and "
        "1.0.11's update decision) and CrewAI Memory with its analysis and consolidation on, "
        "probed for what crosses a scope: rows of another scope in the model's prompt, an "
        "update or delete decision over them, a consolidation merging two scopes' rows, a "
        "scope the model inferred (docs/scripted-model.md).",
        context, (verdicts, found, evidence), ())
