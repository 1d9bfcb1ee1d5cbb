"""The governance matrix (beyond the paper), from the traces alone (metrics.sql `matrix_*`).

Per target (a profile of the bundled server, or a live endpoint), from its canonical matrix
run: a heatmap (principal x path, colour = gap rate, one panel per target), the gap
catalogue (path, principal, what leaks or changes, count, a minimal HTTP reproduction and the
mechanism in one sentence), the cross-tenant tally, the paper's two rates at N = 2 F^2 K, and
one summary line per target. Written to reports/MATRIX.md, reports/tables/matrix_*.{csv,md}
and reports/figures/matrix_heatmap.png; without matrix runs the section says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from PIL import Image  # noqa: E402

from fleetprobe.analysis.base.html import figure_file, table_file  # noqa: E402
from fleetprobe.analysis.base.section import Context, SectionOutput, finish  # noqa: E402
from fleetprobe.analysis.base.stats import rate  # noqa: E402
from fleetprobe.analysis.base.tables import markdown, records  # noqa: E402
from fleetprobe.policy import PATHS  # noqa: E402

KEY, TITLE = "matrix", "Governance matrix"
EXPERIMENTS = ("matrix",)
TABLES = ("matrix_summary", "matrix_cross_tenant", "matrix_paper_rates", "matrix_not_applicable",
          "matrix_na_reasons", "matrix_oracles", "matrix_side_effects", "matrix_entity_census",
          "matrix_agent_drift", "matrix_gaps")
# the views load() reads per canonical run (matrix_canonical picks the runs)
RUN_VIEWS = ("matrix_summary", "matrix_cells", "matrix_gap_catalogue", "matrix_cross_tenant",
             "matrix_paper_rates", "matrix_not_applicable", "matrix_na_reasons",
             "matrix_oracles", "matrix_side_effects", "matrix_entity_census",
             "matrix_agent_drift")
VIEWS = ("matrix_canonical", *RUN_VIEWS)

NO_RUNS = ("No matrix runs yet: run `python -m fleetprobe batch params/extended.yaml` (every "
           "profile at full scale) or `PROFILE=hardened make run-matrix` (one profile), then "
           "`make report`.")
RELATIONS = ("own", "same_fleet", "other_fleet", "null_fleet", "homeless")
# the checker's labels (experiments/matrix/check.py principal_label): an agent id nobody
# registered is `unregistered <relation>`
PRINCIPALS = ("tenant key", *(f"t{t} {rel}" for t in range(4) for rel in RELATIONS),
              *(f"unregistered {rel}" for rel in RELATIONS), "other tenant")
PATH_ORDER = tuple(PATHS)
PROFILE_ORDER = ("memclaw-2026-05-30", "memclaw-2026-05-31", "proposed", "hardened", "naive",
                 "memclaw-2.29")

# A minimal HTTP reproduction per path; {who}, {row}, {fleets}, {target} come from the
# example probe (plan names: the run's nonce prefixes every fleet and agent id on the wire).
REPRODUCTION = {
    "get": "GET /api/v1/memories/<id of {row}>?tenant_id=<t>",
    "contradictions": "GET /api/v1/memories/<id of {row}>/contradictions?tenant_id=<t>",
    "list": "GET /api/v1/memories?tenant_id=<t>&agent_id=<owner of {row}>&limit=500",
    "list_fleet": "GET /api/v1/memories?tenant_id=<t>&agent_id=<owner of {row}>"
                  "&fleet_id={fleets}",
    "list_deleted": "GET /api/v1/memories?tenant_id=<t>&agent_id=<owner of {row}>"
                    "&include_deleted=true",
    "search": 'POST /api/v1/search {{"tenant_id":"<t>","query":"<content of {row}>"}}',
    "search_fleet": 'POST /api/v1/search {{"query":"<content of {row}>",'
                    '"fleet_ids":["{fleets}"]}}',
    "search_fleets": 'POST /api/v1/search {{"query":"<content of {row}>",'
                     '"fleet_ids":["{fleets}"]}}',
    "search_singular": 'POST /api/v1/search {{"query":"<content of {row}>",'
                       '"fleet_id":"{fleets}"}}',
    "search_agent": 'POST /api/v1/search {{"query":"<content of {row}>",'
                    '"filter_agent_id":"<owner of {row}>"}}',
    "recall": 'POST /api/v1/recall {{"tenant_id":"<t>","query":"<content of {row}>"}}',
    "recall_agent": 'POST /api/v1/recall {{"query":"<content of {row}>",'
                    '"filter_agent_id":"<owner of {row}>"}}',
    "recall_fleet": 'POST /api/v1/recall {{"query":"<content of {row}>",'
                    '"fleet_ids":["{fleets}"]}}',
    "recall_fleets": 'POST /api/v1/recall {{"query":"<content of {row}>",'
                     '"fleet_ids":["{fleets}"]}}',
    "entity": "GET /api/v1/entities/<entity linked to {row}>?tenant_id=<t>",
    "agent_read": "GET /api/v1/agents/<owner of {row}>?tenant_id=<t>",
    "whoami": "GET /api/v1/whoami with X-Agent-ID: <owner of {row}>",
    "dup_exact": 'POST /api/v1/memories {{"content":"<content of {row}>"}}',
    "dup_near": 'POST /api/v1/memories {{"content":"<content of {row}> again",'
                '"write_mode":"strong"}}',
    "dup_fast": 'POST /api/v1/memories {{"content":"<content of {row}> again",'
                '"write_mode":"fast"}}, then read metadata.near_duplicate_of',
    "dup_exact_fleet": 'POST /api/v1/memories {{"fleet_id":"{fleets}",'
                       '"content":"<content of {row}>"}}',
    "dup_near_fleet": 'POST /api/v1/memories {{"fleet_id":"{fleets}",'
                      '"content":"<content of {row}> again","write_mode":"strong"}}',
    "bulk_attempt": "POST /api/v1/memories/bulk with X-Bulk-Attempt-Id: <the attempt id "
                    "that wrote {row}>",
    "idempotency": "POST /api/v1/memories with Idempotency-Key: <the key that wrote {row}>, "
                   "another body",
    "patch": 'PATCH /api/v1/memories/<id of {row}>?tenant_id=<t> {{"weight":0.42}}',
    "patch_content": 'PATCH /api/v1/memories/<id of {row}>?tenant_id=<t> '
                     '{{"content":"<new words>"}}',
    "patch_status": 'PATCH /api/v1/memories/<id of {row}>/status?tenant_id=<t> '
                    '{{"status":"archived"}}',
    "delete": "DELETE /api/v1/memories/<id of {row}>?tenant_id=<t>",
    "redistribute": "POST /api/v1/memories/redistribute?tenant_id=<t>&agent_id=<{who}> "
                    '{{"memory_ids":["<id of {row}>"],"target_agent_id":"<{target}>"}}',
    "redistribute_x": "POST /api/v1/memories/redistribute?tenant_id=<t>&agent_id=<{who}> "
                      '{{"memory_ids":["<id of {row}>"],"target_agent_id":"<{target}>"}}',
    "after_redistribute": 'PATCH /api/v1/memories/<id of {row}> {{"weight":0.42}} after '
                          "redistributing it to <{target}>",
    "write": 'POST /api/v1/memories {{"fleet_id":"{fleets}","content":"..."}}',
    "bulk_write": 'POST /api/v1/memories/bulk {{"fleet_id":"{fleets}","items":[...]}}',
    "entity_upsert": 'POST /api/v1/entities/upsert {{"fleet_id":"{fleets}",'
                     '"entity_type":"service","canonical_name":"<that fleet\'s entity>"}}',
}

# One sentence per path: why the target does it. "wire contract" = MemClaw's REST contract
# as read from its open-source repository (section numbers of the kit's spec of it).
MECHANISM = {
    "get": "GET by id checks the tenant only, as MemClaw did before fde5ceb (2026-05-30; "
           "wire contract 4.4, history).",
    "contradictions": "/contradictions shares GET-by-id's gate and lists the neighbours of a "
                      "supersession chain unfiltered before 2026-05-30 (wire contract 2.4, 4.4).",
    "list": "Without fleet_id, list applies no fleet or trust rule: an identity sees every "
            "scope_team and scope_org row of the tenant (wire contract 2.5).",
    "list_fleet": "list's fleet_id is strict equality; the trust check applies only to a "
                  "named fleet (wire contract 2.5).",
    "list_deleted": "include_deleted=true is honoured for any credential, so soft-deleted "
                    "rows come back to agents (wire contract 2.5).",
    "search": "Search identity comes from filter_agent_id only (wire contract 4.2, V-May): an "
              "agent key without it searches tenant-wide minus private rows, and an agent "
              "with no home fleet gets an unscoped search (4.3, gaps as coded).",
    "search_fleet": "With no search identity the one named fleet is never checked against the "
                    "caller's trust (wire contract 4.3).",
    "search_fleets": "A multi-element fleet_ids skips enforce_fleet_read (wire contract 4.3, "
                     "gaps as coded).",
    "search_singular": "A singular fleet_id is ignored (unknown field), so the search runs "
                       "unscoped (wire contract 2.3; search-leak hypothesis).",
    "search_agent": "filter_agent_id is both the author filter and the visibility identity "
                    "(wire contract 2.3, 4.2): naming another agent searches as that agent.",
    "recall": "/recall takes the same request as search and uses only filter_agent_id as "
              "caller identity (wire contract 2.3).",
    "recall_agent": "/recall's filter_agent_id is both the author filter and its only caller "
                    "identity (wire contract 2.3, 4.2): naming another agent recalls as that "
                    "agent.",
    "recall_fleet": "/recall takes search's request with filter_agent_id as its only identity: "
                    "with none, the one named fleet is never checked against the caller's "
                    "trust (wire contract 2.3, 4.3).",
    "recall_fleets": "/recall takes search's request: a multi-element fleet_ids skips "
                     "enforce_fleet_read (wire contract 2.3, 4.3, gaps as coded).",
    "entity": "GET /entities/{id} returns the entity whatever its fleet, and its linked "
              "memories are filtered by the by-id predicate only (wire contract 2.10, 4.4).",
    "agent_read": "GET /agents/{id} returns any agent of the tenant, trust level and home "
                  "fleet included (wire contract 2.12).",
    "whoami": "whoami reports an identity the key does not carry.",
    "dup_exact": "The exact-duplicate answer names a row of another scope.",
    "dup_near": "The strong-mode near-duplicate gate compares across the agents of a fleet and "
                "visibility, private rows included, and names the row it matched "
                "(wire contract 5.1).",
    "dup_fast": "A fast-mode write (the default mode) never refuses a near-duplicate but "
                "stamps metadata.near_duplicate_of with the nearest row of the fleet and "
                "visibility across agents, private rows included (wire contract 5.1, 5.3).",
    "dup_exact_fleet": "The exact-duplicate check looks up the fleet the write names, not the "
                       "caller's, and its 409 names the row it matched (wire contract 5.1).",
    "dup_near_fleet": "The strong-mode near-duplicate gate compares within the fleet the write "
                      "names, across its agents, private rows included, and its 409 names the "
                      "row it matched (wire contract 5.1).",
    "bulk_attempt": "Bulk attempt ids are looked up tenant-wide: reusing another agent's "
                    "X-Bulk-Attempt-Id answers duplicate_attempt with its row ids "
                    "(wire contract 2.2).",
    "idempotency": "Idempotency-Keys are tenant-wide: another agent's key answers 422 "
                   "'reused with a different request body' or replays its response "
                   "(wire contract 2.1).",
    "patch": "PATCH lets the caller change a row the policy does not let it change.",
    "patch_content": "PATCH of content runs only enforce_update (trust 0 refused, trust 1-2 "
                     "own rows, trust 3 any row) and re-embeds the row: it does not ask "
                     "whether the row lies in the caller's write scope (wire contract 2.7).",
    "patch_status": "PATCH status runs only the by-id write check: no trust or ownership rule "
                    "(wire contract 2.6).",
    "delete": "DELETE lets the caller remove a row the policy does not let it remove.",
    "redistribute": "A trust-3 redistribute moves any live row of the tenant, other agents' "
                    "private rows included (wire contract 2.9); the sibling path (paper 9.3) "
                    "moves any row the requester can read, not only its own.",
    "redistribute_x": "A trust-3 redistribute moves any live row of the tenant to any "
                      "approved agent, other agents' private rows included (wire contract "
                      "2.9).",
    "after_redistribute": "After a redistribute the former owner can still change the row.",
    "write": "The write gate lets the caller write into a fleet outside its write scope.",
    "bulk_write": "The bulk write gate lets the caller write into a fleet outside its write "
                  "scope.",
    "entity_upsert": "Entity upsert has no trust, agent or fleet checks (wire contract 2.10).",
}
DRIFT = ("Besides, the run's home-less agents were given a home fleet by a search that named "
         "one fleet (search side effect, wire contract 2.3), and read and write that fleet "
         "from then on (see the drift table).")
FLAT = "The flat store has no sub-tenant scope at all (the comparand the paper lacks)."
# Why a backend does what the matrix found, per (backend, path family); a family is the path's
# first word (search_fleet -> search). docs/backends.md has the mappings.
BACKEND_MECHANISM: dict[tuple[str, str], str] = {
    ("langgraph", "get"): "GET by id searches the caller's namespace prefix filtered on the id: "
                          "an agent's home-fleet prefix holds its fleet-mates' agent namespaces.",
    ("langgraph", "search"): "A search reads the namespace prefix of every fleet the request "
                             "names (else the caller's home fleet): any fleet may be named, "
                             "there is no trust ladder, and a fleet prefix holds its agents' "
                             "private namespaces.",
    ("mem0", "get"): "Memory.get(memory_id) takes no identity: any key reads any row, across "
                     "fleets and tenants (strands-agents/tools#596 adds the check downstream).",
    ("mem0", "search"): "Search filters are the caller's choice (user_id = tenant, fleet_id "
                        "in metadata): mem0 has no visibility concept and no trust ladder.",
    ("crewai", "get"): "get_record(id) takes no scope and no source: any key reads any record, "
                       "private ones included.",
    ("crewai", "search"): "Recall runs under the scope path of any fleet named (no trust "
                          "ladder), matched as a string prefix (crewAIInc/crewAI#7543).",
}
MATRIX_WRITE = ("A write lands in the fleet the body names: the backend has no write gate and "
                "no trust levels.")
MATRIX_MISS = ("The backend's scope for the caller (its namespace prefix, filters or scope path: "
               "the fleets named, else its home fleet) leaves out a row the policy lets it read "
               "(fleet-less rows, scope_org rows, other fleets at trust 2).")


BACKEND_PREFIX = "backend-"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MISS = {
    "search": "Without a search identity private rows are dropped even for their author "
              "(wire contract 4.3: no identity, visibility <> scope_agent).",
}


@dataclass
class MatrixSection:
    markdown: str
    paths: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    catalogue: pd.DataFrame = field(default_factory=pd.DataFrame)


def _label(profile: str | None, target_kind: str | None) -> str:
    """The run's target label (the `runs` view's profile column is the label)."""
    return profile or f"unknown {target_kind or 'target'}"


def _order(labels: list[str]) -> list[str]:
    rank = {p: i for i, p in enumerate(PROFILE_ORDER)}
    return sorted(labels, key=lambda s: (rank.get(s, len(rank)), s))


def load(con: duckdb.DuckDBPyConnection) -> dict[str, pd.DataFrame]:
    """The matrix views restricted to each target's canonical run."""
    runs = con.execute("SELECT * FROM matrix_canonical").df()
    if runs.empty:
        return {}
    ids = list(runs.run_id)
    out = {"runs": runs}
    for view in RUN_VIEWS:
        # ORDER BY ALL: a total order, so committed tables are a pure function of the traces
        frame = con.execute(f"SELECT * FROM {view} WHERE run_id IN "
                            f"(SELECT unnest(?::VARCHAR[])) ORDER BY ALL", [ids]).df()
        labels = {r.run_id: _label(r.profile, r.target_kind) for r in runs.itertuples()}
        frame["target"] = frame["run_id"].map(labels)
        out[view] = frame
    return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def reproduction(row: Mapping[str, Any]) -> str:
    """A catalogue line's HTTP reproduction, from its example probe (a row of the catalogue
    view, as a dict or a Series)."""
    template = REPRODUCTION.get(row["path"], "{path}")
    fleets = _text(row.get("fleets")).replace(",", '","')
    text = template.format(who=_text(row.get("who")) or "?",
                           row=_text(row.get("row_key")) or "?", fleets=fleets or "<fleet>",
                           target=_text(row.get("target_agent")) or "?", path=row["path"])
    variant = _text(row.get("variant"))
    if variant:
        text += (" with tenant_id=<the row's tenant>" if variant == "named"
                 else " with tenant_id=<the caller's own tenant>")
    status = row.get("example_status")
    answer = f" -> {int(status)}" if pd.notna(status) else ""
    return f"as {_text(row.get('who'))} (X-API-Key of that principal): {text}{answer}"


def mechanism(row: pd.Series | object) -> str:
    """One sentence for a catalogue line: the bundled server's mechanism for a bundled
    profile (target kind `reference`); for any other target, what it answered."""
    profile, path, verdict = str(row.profile), row.path, row.verdict
    if getattr(row, "target_kind", "reference") != "reference":
        return answered(row)
    if profile == "naive" and verdict == "gap":
        return FLAT
    if verdict == "miss":
        return MISS.get("search" if path.startswith(("search", "recall")) else path,
                        "The path withholds a row the policy lets the caller read.")
    return MECHANISM.get(path, "")


def answered(row: pd.Series | object) -> str:
    """A live, engine or backend target's line, from its trace: the request, the status it
    answered and what that did; for a backend, its library's documented behaviour beside."""
    status = getattr(row, "example_status", None)
    answer = f"HTTP {int(status)}" if pd.notna(status) else "no HTTP answer"
    op = UUID.sub("<id>", _text(getattr(row, "op", None))) or row.path
    text = (f"{row.target} answered {op} with {answer} ({int(row.count)} probe(s) by "
            f"{row.principal}): it {row.what}, which the policy "
            f"{'denies' if row.verdict == 'gap' else 'requires to return'}; no mechanism is "
            "known for this target beyond its answers.")
    backend = str(row.profile)[len(BACKEND_PREFIX):] if str(row.profile).startswith(
        BACKEND_PREFIX) else None
    if backend is None:
        return text
    if row.verdict == "miss":
        documented = MATRIX_MISS
    elif row.path in ("write", "bulk_write", "entity_upsert"):
        documented = MATRIX_WRITE
    else:
        documented = BACKEND_MECHANISM.get(
            (backend, "search" if row.path.startswith("search") else row.path), "")
    return f"{text} Documented for {backend} (docs/backends.md): {documented}" if documented \
        else text


def catalogue(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    cat = frames["matrix_gap_catalogue"].copy()
    if cat.empty:
        return pd.DataFrame(columns=["target", "path", "principal", "verdict", "what", "count",
                                     "visibilities", "reproduction", "mechanism"])
    cat["reproduction"] = [reproduction(r) for r in records(cat)]
    drifted = set(frames["matrix_agent_drift"].run_id)
    kinds = dict(zip(frames["runs"].run_id, frames["runs"].target_kind, strict=True))
    cat["target_kind"] = cat.run_id.map(kinds)
    cat["mechanism"] = [
        mechanism(r)
        + (" " + DRIFT if r.run_id in drifted and "homeless" in r.principal
           and r.target_kind == "reference" else "")
        for r in cat.itertuples()]
    path_rank = {p: i for i, p in enumerate(PATH_ORDER)}
    who_rank = {p: i for i, p in enumerate(PRINCIPALS)}
    target_rank = {t: i for i, t in enumerate(_order(list(cat.target.unique())))}
    cat = cat.sort_values(["target", "path", "principal", "verdict", "what"], key=lambda s: (
        s.map(target_rank) if s.name == "target" else s.map(path_rank) if s.name == "path"
        else s.map(who_rank) if s.name == "principal" else s))
    return cat[["target", "path", "principal", "verdict", "what", "count", "visibilities",
                "example_probe", "reproduction", "mechanism"]].reset_index(drop=True)


def grouped(cat: pd.DataFrame) -> pd.DataFrame:
    """The catalogue for reading: one line per (target, path, verdict, what), the principals
    it holds for, one reproduction (of the first principal listed) and the mechanism."""
    if cat.empty:
        return pd.DataFrame(columns=["target", "path", "verdict", "what", "count", "principals",
                                     "reproduction", "mechanism"])
    groups = cat.groupby(["target", "path", "verdict", "what"], sort=False)
    frame = groups.agg(count=("count", "sum"), principals=("principal", _listed),
                       reproduction=("reproduction", "first"), mechanism=("mechanism", "first"))
    return frame.reset_index().astype({"count": int})


def _listed(values: pd.Series) -> str:
    """The distinct values, in order of first appearance."""
    return ", ".join(dict.fromkeys(values))


def summary(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    s = frames["matrix_summary"].copy()
    rates = frames["matrix_paper_rates"]
    for metric, column in (("tenant-key GET exposure (expected deny)", "paper_get_exposure"),
                           ("search leak rate (expected deny)", "paper_search_leak")):
        values = {}
        for r in rates[rates.metric == metric].itertuples():
            x = rate(int(r.numerator), int(r.denominator))
            values[r.run_id] = (f"{x.k}/{x.n} = {x.value:.3f} [{x.low:.3f}, {x.high:.3f}]"
                                if x.n else "")
        s[column] = [values.get(run, "not run") for run in s.run_id]
    s = s.set_index("target").loc[_order(list(s.target))].reset_index()
    return s[["target", "run_id", "complete", "incomplete_reason", "shortfalls", "probes",
              "random_probes", "gaps", "misses", "oracles", "side_effects", "refused",
              "not_applicable", "errors", "cross_tenant_probes", "cross_tenant_successes",
              "agents_drifted", "paper_get_exposure", "paper_search_leak"]]


def paper_rates(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for r in frames["matrix_paper_rates"].itertuples():
        x = rate(int(r.numerator), int(r.denominator))
        rows.append({"target": r.target, "metric": r.metric, "k": x.k, "n": x.n,
                     "rate": round(x.value, 4) if x.n else None,
                     "ci_low": round(x.low, 4) if x.n else None,
                     "ci_high": round(x.high, 4) if x.n else None})
    frame = pd.DataFrame(rows, columns=["target", "metric", "k", "n", "rate", "ci_low",
                                        "ci_high"])
    # a total order, so the committed table is a pure function of the traces
    return frame.sort_values(["target", "metric"], kind="stable").reset_index(drop=True)


# Heatmap geometry, in inches: a cell, the margins around a panel (its principals on the
# left, its paths below, its title above) and the colour bar. A fixed layout: no layout pass.
CELL_W, CELL_H = 0.15, 0.13
LEFT, RIGHT, TOP, BOTTOM = 1.35, 0.75, 0.55, 0.15
PANEL_TOP, PANEL_BOTTOM, PANEL_GAP = 0.22, 1.0, 0.15
HEATMAP_DPI = 130
LABEL_SIZE = 5
# PNG only: the cells are an image in any format, and a PDF of the panels took as long to
# draw as the PNG
HEATMAP_FILE = "matrix_heatmap.png"


def heatmap_grids(cells: pd.DataFrame, targets: list[str], whos: list[str], paths: list[str],
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(gap share, misses > 0), each of shape (target, principal, path), from one groupby:
    the share is gaps / judged probes, NaN where nothing was judged."""
    sums = cells.groupby(["target", "principal", "path"])[["n", "gaps", "misses"]].sum()
    sums = sums.reindex(pd.MultiIndex.from_product([targets, whos, paths]), fill_value=0)
    shape = (len(targets), len(whos), len(paths))
    n, gaps, misses = (sums[c].to_numpy(dtype=float).reshape(shape)
                       for c in ("n", "gaps", "misses"))
    share = np.divide(gaps, n, out=np.full(shape, np.nan), where=n > 0)
    return share, misses > 0


def label_strip(labels: list[str], width: float, height: float, vertical: bool) -> Image.Image:
    """A panel's path labels (vertical: one per column, hanging below it) or principal labels
    (one per row, ending left of it), drawn once at HEATMAP_DPI on a transparent strip that is
    pasted beside every panel: the panels share their paths and principals, so 28 panels
    cost 58 labels to draw, not 28 x 58 at about a millisecond each."""
    fig = Figure(figsize=(width, height), dpi=HEATMAP_DPI)
    fig.patch.set_alpha(0)
    for i, label in enumerate(labels):
        if vertical:
            fig.text((i + 0.5) * CELL_W / width, 1 - 0.03 / height, label, rotation=90,
                     ha="center", va="top", fontsize=LABEL_SIZE)
        else:
            fig.text(1 - 0.03 / width, 1 - (i + 0.5) * CELL_H / height, label, ha="right",
                     va="center", fontsize=LABEL_SIZE)
    return _pixels(fig)


def _pixels(fig: Figure) -> Image.Image:
    """The figure drawn by Agg, as an RGBA image over the canvas's buffer (read-only)."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba(), "raw",
                            "RGBA", 0, 1)


def heatmap(cells: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Principal x path, colour = gap rate; one panel per target, the colour bar at the
    right; a cell with misses is marked `m`, a cell never probed is grey. One axes, in
    inches, holds every panel (an image each, one marker and one frame collection); the
    path and principal labels are pasted in as pixels (`label_strip`)."""
    targets = _order(list(cells.target.unique()))
    probed_paths, probed_whos = set(cells.path.tolist()), set(cells.principal.tolist())
    paths = [p for p in PATH_ORDER if p in probed_paths]
    whos = [p for p in PRINCIPALS if p in probed_whos]
    share, missed = heatmap_grids(cells, targets, whos, paths)
    # at most three panels a row, so the figure stays readable at 100 % zoom
    ncols = max(1, min(3, len(targets)))
    nrows = -(-len(targets) // ncols)
    panel_w, panel_h = CELL_W * len(paths), CELL_H * len(whos)
    width = LEFT + ncols * panel_w + (ncols - 1) * PANEL_GAP + RIGHT
    height = TOP + nrows * (PANEL_TOP + panel_h + PANEL_BOTTOM) + BOTTOM
    fig = Figure(figsize=(width, height), dpi=HEATMAP_DPI)
    fig.patch.set_facecolor("white")
    ax = fig.add_axes((0, 0, 1, 1), xlim=(0, width), ylim=(0, height))  # inches
    ax.set_axis_off()
    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#d9d9d9")  # grey: nothing judged
    frames, marks, pastes = [], [], []
    for i, target in enumerate(targets):
        row, col = divmod(i, ncols)
        x0 = LEFT + col * (panel_w + PANEL_GAP)
        top = TOP + row * (PANEL_TOP + panel_h + PANEL_BOTTOM) + PANEL_TOP  # from the top
        y0 = height - top - panel_h
        ax.imshow(np.ma.masked_invalid(share[i]), cmap=cmap, vmin=0, vmax=1,
                  extent=(x0, x0 + panel_w, y0, y0 + panel_h), aspect="auto",
                  interpolation="nearest")
        ys, xs = np.nonzero(missed[i])
        marks += [(x0 + (x + 0.5) * CELL_W, y0 + panel_h - (y + 0.5) * CELL_H)
                  for x, y in zip(xs, ys, strict=True)]
        frames.append(Rectangle((x0, y0), panel_w, panel_h))
        ax.text(x0 + panel_w / 2, y0 + panel_h + 0.03, target, ha="center", va="bottom",
                fontsize=7)
        pastes.append(("paths", x0, top + panel_h))
        if col == 0:
            pastes.append(("whos", 0.0, top))
    if marks:  # one collection of markers, not a text per cell
        ax.scatter(*zip(*marks, strict=True), marker="$m$", s=12, c="#1f4e9c", linewidths=0)
    ax.add_collection(PatchCollection(frames, facecolor="none", edgecolor="black",
                                      linewidth=0.6))
    cax = fig.add_axes(((width - RIGHT + 0.15) / width, BOTTOM / height + 0.1,
                        0.12 / width, 1 - (TOP + BOTTOM) / height - 0.2))
    bar = fig.colorbar(ScalarMappable(Normalize(0, 1), cmap), cax=cax)
    bar.set_label("gap rate (gaps / judged probes)", fontsize=6)
    bar.ax.tick_params(labelsize=5)
    fig.suptitle("Governance matrix: where each target returns, reveals or changes what the "
                 "policy denies (m = misses, grey = not probed)", fontsize=8,
                 y=1 - 0.15 / height, va="top")
    strips = {"paths": label_strip(paths, panel_w, PANEL_BOTTOM, vertical=True),
              "whos": label_strip(whos, LEFT, panel_h, vertical=False)}
    image = _pixels(fig).copy()  # a copy to paste into
    for kind, left, top in pastes:  # pixel boxes from the top left, as PIL counts
        image.alpha_composite(strips[kind], (round(left * HEATMAP_DPI),
                                             round(top * HEATMAP_DPI)))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / HEATMAP_FILE
    image.convert("RGB").save(path, format="PNG")  # no metadata: the same bytes every build
    return [path]


def _by_target(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` of a per-run view, targets in report order (rows in view order within)."""
    rank = {t: i for i, t in enumerate(_order(list(frame.target.unique())))}
    frame = frame.sort_values("target", key=lambda s: s.map(rank), kind="stable")
    return frame[columns].reset_index(drop=True)


def _md(frame: pd.DataFrame, empty: str) -> str:
    return markdown(frame) if not frame.empty else f"_{empty}_"


def write(con: duckdb.DuckDBPyConnection, out_dir: Path) -> MatrixSection:
    """reports/MATRIX.md, the matrix tables and the heatmap (or the 'no runs yet' note)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = load(con)
    md_path = out_dir / "MATRIX.md"
    if not frames:
        md_path.write_text(f"# Governance matrix\n\n{NO_RUNS}\n")
        return MatrixSection(NO_RUNS, [md_path], [NO_RUNS])
    tables_dir = out_dir / "tables"
    tables_dir.mkdir(parents=True, exist_ok=True)
    summ, cat = summary(frames), catalogue(frames)
    cross = frames["matrix_cross_tenant"].groupby("target", as_index=False)[
        ["probes", "successes"]].sum()
    papers = paper_rates(frames)
    na = frames["matrix_not_applicable"][["target", "path", "probes", "reason"]]
    na_reasons = _by_target(frames["matrix_na_reasons"],
                            ["target", "reason", "probes", "paths", "example_probe"])
    oracles, effects = (_by_target(frames[v], ["target", "path", "what", "count",
                                               "example_probe"])
                        for v in ("matrix_oracles", "matrix_side_effects"))
    census = _by_target(frames["matrix_entity_census"],
                        ["target", "entities", "entities_read", "linked_rows",
                         "entity_links_skipped"])
    drift = frames["matrix_agent_drift"][["target", "who", "trust_before", "trust_after",
                                          "home_before", "home_after"]]
    written = []
    detail = cat.drop(columns=["reproduction", "mechanism"])
    for name, frame in (("matrix_summary", summ), ("matrix_gaps", detail),
                        ("matrix_cross_tenant", cross), ("matrix_paper_rates", papers),
                        ("matrix_not_applicable", na), ("matrix_na_reasons", na_reasons),
                        ("matrix_oracles", oracles), ("matrix_side_effects", effects),
                        ("matrix_entity_census", census), ("matrix_agent_drift", drift)):
        path = tables_dir / f"{name}.csv"
        frame.to_csv(path, index=False)
        written.append(path)
    figures = heatmap(frames["matrix_cells"], out_dir / "figures")
    written += figures
    text = "\n\n".join([
        "# Governance matrix",
        "Every principal (tenant key; agent keys at trust 0-3 by relation to the row; another "
        "tenant) x every path, judged against the declarative policy in "
        "`lib/fleetprobe/policy.py` (the paper's Inv-Scope). A gap: the path returned, "
        "revealed or changed what the policy denies. A miss: a path that must return the row "
        "withheld it. Refused: a change the policy allows was refused (stricter, not a miss). "
        "Oracle: a denied probe whose answer tells that the row or key exists (it differs from "
        "the answer for an id that does not exist). Side effect: a probe that registered, "
        "re-homed or re-trusted a principal (not a probe of its own: probe counts leave it "
        "out). Incomplete runs say why (`incomplete_reason`, `shortfalls`).",
        "![heatmap](figures/matrix_heatmap.png)",
        "## Summary per target\n\n" + _md(summ, "no runs"),
        "## Cross-tenant tally\n\n" + _md(cross, "no cross-tenant probes"),
        "## The paper's two rates at scale (paper 7.1 design; N = 2 F^2 K)\n\n" + _md(
            papers, "no paper-scale probes in these runs (set paper_fleets: 10)"),
        "## Endpoints a target lacks (n/a)\n\n" + _md(na, "none: every path answered"),
        "## Probes not applicable, by reason\n\n" + _md(na_reasons, "none"),
        "## Existence oracles\n\nA denied probe whose answer tells \"exists\" from \"does "
        "not exist\" (`what` quotes both answers).\n\n" + _md(
            oracles, "none (a run recorded before the matrix rework has no oracle verdicts at "
                     "all)"),
        "## Side effects\n\nProbes that changed a principal as the target answered them.\n\n"
        + _md(effects, "none (a run recorded before the matrix rework has no side-effect "
                       "verdicts at all)"),
        "## Entity census\n\nEntities read back after the rows were written, the rows their "
        "linked_memories list, and the rows whose link the target did not keep (their entity "
        "probes are n/a).\n\n" + _md(
            census, "no entity census in these runs (a run takes one since the matrix rework)"),
        "## Principals the probes changed (drift)\n\n" + _md(
            drift, "none: every agent kept its trust and home fleet"),
        "## Gap catalogue\n\nOne line per target, path and finding; the principals it holds "
        "for; a reproduction with the first of them (plan names: the run's nonce prefixes "
        "every fleet and agent id on the wire). Per principal, with counts and visibilities: "
        "`tables/matrix_gaps.csv`.\n\n" + _md(grouped(cat), "no gaps and no misses"),
    ]) + "\n"
    md_path.write_text(text)
    written.insert(0, md_path)
    return MatrixSection(text, written, [], summ, cat)


def build(context: Context) -> SectionOutput:
    """MATRIX.md, the matrix tables and the heatmap, and the section of the page."""
    results = context.results(EXPERIMENTS)
    try:
        section = write(results.con, context.out_dir)
    finally:
        results.con.close()
    out_dir = context.out_dir
    runs = tuple(section.summary.run_id) if not section.summary.empty else ()
    tables = {name: found for name in TABLES
              if (found := table_file(name, out_dir, "")) is not None}
    figures = {"matrix_heatmap": replace(found, views=("matrix_cells",))} if (
        found := figure_file("matrix_heatmap", out_dir, "")) is not None else {}
    output = SectionOutput(
        KEY, TITLE,
        "Every principal (tenant key; agent keys at trust 0-3 by relation to the row; another "
        "tenant) x every path, judged against the written policy: gaps (returns, reveals or "
        "changes what the policy denies) and misses per target, the cross-tenant tally, the "
        "gap catalogue with a reproduction and a mechanism per line. Full text: MATRIX.md. "
        "The heatmap is a PNG only: its cells are pixels in any format, and a PDF of its "
        "panels took as long again to draw for no sharper cell.",
        tables=tables, figures=figures, files=section.paths,
        notes=[n for n in section.notes if n != NO_RUNS], notebook="matrix.ipynb",
        views=VIEWS, runs=runs, data={"matrix": section})
    return finish(output, context)
