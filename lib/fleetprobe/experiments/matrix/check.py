"""The `matrix` checker: a pure function from recorded events to verdicts.

It reads only what was observed: the principals' trust and home fleet (`census_agent`, as
the target reported them), the rows' fleet, visibility, owner, status and deletion
(`census_row`), and each probe's outcome (`probe`, `observe`, `paper`), and judges every
probe against `fleetprobe.policy`. Verdicts:

- `gap`: the path returned, revealed or changed what the policy denies;
- `miss`: a path that must return the row withheld what the policy allows;
- `refused`: a change the policy allows was refused (stricter than the policy, not a miss);
- `n/a`: the target has no such endpoint (its own words in `what`), or a backend adapter
  answered that its memory system has no equivalent of the probe or of the world-building
  step the probe needs (`not_applicable`, docs/backends.md): neither a pass nor a failure;
- `error`: no answer (transport error) or the probe's subject was never observed;
- `ok`: everything else.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleetprobe import policy
from fleetprobe.policy import ALLOW, DENY, PATHS, Principal, Row

NA_STATUSES = (404, 405, 501)
NA_MESSAGES = ("Not Found", "Method Not Allowed", "Not Implemented")

WHAT_GAP = {
    "read": "returns the row", "reveal": "reveals the row's id", "change": "changes the row",
    "write": "writes into the fleet", "redistribute": "re-homes the row",
    "identity": "reports another identity",
}
WHAT_GAP_PATH = {"agent_read": "returns the agent record",
                 "entity_upsert": "writes an entity into the fleet"}


def endpoint_absent(event: dict[str, Any]) -> str | None:
    """The target's words when it has no route for the probe (None when it answered), or
    a backend adapter's "not supported by this backend" reason."""
    if event.get("not_applicable"):
        return str(event["not_applicable"])
    if event.get("status") not in NA_STATUSES:
        return None
    message = (event.get("error") or "").split(" ", 1)[-1]
    return event["error"] if message in NA_MESSAGES else None


def principal_label(p: Principal | None, rel: str) -> str:
    if rel == "tenant":
        return "tenant key"
    if rel == "other_tenant" or p is None:
        return "other tenant"
    return f"t{p.trust} {rel}"


def world_from(events: Iterable[dict[str, Any]]
               ) -> tuple[dict[str, Principal], dict[str, Row]]:
    """Principals and rows as the census observed them before the probes."""
    principals: dict[str, Principal] = {}
    rows: dict[str, Row] = {}
    for e in events:
        if e["phase"] == "census_agent" and e.get("step") != "after":
            if e.get("credential") == "tenant":
                principals[e["who"]] = Principal(e["tenant"], "tenant")
            elif e.get("trust") is not None:
                principals[e["who"]] = Principal(e["tenant"], "agent", e["who"], e["trust"],
                                                 e.get("home"))
        elif e["phase"] == "census_row":
            rows[e["row_key"]] = Row(e["tenant"], e.get("fleet"), e["visibility"],
                                     e.get("owner"), e.get("row_status") or "active",
                                     bool(e.get("deleted")))
    return principals, rows


def judge(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One verdict per `probe` and `paper` event."""
    principals, rows = world_from(events)
    observed = {e["probe_id"]: e.get("after") for e in events if e["phase"] == "observe"}
    verdicts = []
    for e in events:
        if e["phase"] == "probe":
            verdicts.append(judge_probe(e, principals, rows, observed.get(e["probe_id"])))
        elif e["phase"] == "paper":
            verdicts.append(judge_paper(e))
    return verdicts


def _verdict(e: dict[str, Any], p: Principal | None, row: Row | None, rel: str,
             expected: str | None, verdict: str, what: str | None) -> dict[str, Any]:
    return {"probe_id": e["probe_id"], "path": e["path"],
            "principal": principal_label(p, rel), "relation": rel,
            "trust": p.trust if p is not None and p.kind == "agent" else None,
            "visibility": row.visibility if row else None, "expected": expected,
            "verdict": verdict, "what": what, "cross_tenant": rel == "other_tenant"}


def _after(row: Row, after: str | None) -> Row:
    """The row as observed after a redistribute (`after` = "<owner> <visibility>")."""
    if not after:
        return row
    owner, _, visibility = after.partition(" ")
    return Row(row.tenant, row.fleet, visibility or row.visibility, owner, row.status,
               row.deleted)


def judge_probe(e: dict[str, Any], principals: dict[str, Principal], rows: dict[str, Row],
                after: str | None = None) -> dict[str, Any]:
    path = e["path"]
    p = principals.get(e["who"])
    row = rows.get(e["row_key"])
    if e.get("not_applicable"):  # before the subject: an unbuilt row was never observed
        owner = principals.get(row.owner or "") if row is not None else None
        if path == "agent_read" and owner is not None:
            row = policy.agent_record(owner)
        rel = policy.relation(p, row) if p is not None and row is not None else "unknown"
        return _verdict(e, p, row, rel, None, "n/a", str(e["not_applicable"]))
    if p is None or row is None:
        return _verdict(e, p, row, "unknown", None, "error", "subject not observed")
    if path == "after_redistribute":
        row = _after(row, e.get("after"))
    if path == "agent_read":
        owner = principals.get(row.owner or "")
        if owner is None:
            return _verdict(e, p, row, "unknown", None, "error", "owner not observed")
        row = policy.agent_record(owner)
    rel = policy.relation(p, row)
    absent = endpoint_absent(e)
    if absent:
        return _verdict(e, p, row, rel, None, "n/a", absent)
    if e.get("status") is None:
        return _verdict(e, p, row, rel, None, "error", e.get("error") or "no answer")
    kind = PATHS[path].kind
    returned = bool(e.get("returned"))
    gap_what = WHAT_GAP_PATH.get(path, WHAT_GAP[kind])
    named = [f or None for f in (e.get("fleets") or "").split(",")] if e.get("fleets") else []

    if kind in ("read", "reveal"):
        expected = policy.read(p, row, path)
        if returned and expected == DENY:
            return _verdict(e, p, row, rel, expected, "gap", gap_what)
        collateral = _collateral(e, p, rows, row)
        if collateral:
            return _verdict(e, p, row, rel, expected, "gap", collateral)
        eligible = all(policy.fleet_readable(p, row.tenant, f) for f in named)
        if path == "entity":  # linked rows come back only with an entity the caller may read
            eligible = policy.read(p, policy.entity_record(row.tenant, row.fleet)) == ALLOW
        if kind == "read" and not returned and eligible and policy.must_return(
                path, row, expected, tuple(named), p.agent_id):
            return _verdict(e, p, row, rel, expected, "miss", "withholds the row")
        return _verdict(e, p, row, rel, expected, "ok", None)
    if kind == "identity":
        expected = ALLOW if rel == "own" else DENY
        verdict = "gap" if returned and expected == DENY else "ok"
        return _verdict(e, p, row, rel, expected, verdict, gap_what if verdict == "gap" else None)
    if kind == "change":
        expected = policy.change(p, row)
    elif kind == "redistribute":
        expected = policy.redistribute(p, row, principals.get(e.get("target") or ""))
    else:  # write: judged on the fleet the row landed in, else the fleet asked for
        fleet = e.get("got") if returned else (named[0] if named else row.fleet)
        expected = policy.write(p, row.tenant, fleet)
    if returned and expected == DENY:
        return _verdict(e, p, row, rel, expected, "gap", gap_what)
    if not returned and expected == ALLOW:
        return _verdict(e, p, row, rel, expected, "refused", "refuses an allowed change")
    return _verdict(e, p, row, rel, expected, "ok", None)


def _collateral(e: dict[str, Any], p: Principal, rows: dict[str, Row], row: Row) -> str | None:
    """Other things the answer showed: neighbour rows (contradictions), the entity record."""
    got = e.get("got") or ""
    if e["path"] == "entity" and "entity" in got.split():
        if policy.read(p, policy.entity_record(row.tenant, row.fleet)) == DENY:
            return "returns the entity record"
    if e["path"] == "contradictions":
        for key in got.split():
            other = rows.get(key)
            if other is not None and policy.read(p, other) == DENY:
                return "reveals a neighbour row"
    return None


def judge_paper(e: dict[str, Any]) -> dict[str, Any]:
    """The paper's probe design, judged by the paper's own expectation (section 7.1)."""
    scope = "agent" if e["visibility"] == "scope_agent" else "fleet"
    expected = policy.paper_expected(scope, e["relation"])
    returned = bool(e.get("returned"))
    verdict = ("error" if e.get("status") is None else
               "gap" if returned and expected == DENY else
               "miss" if not returned and expected == ALLOW else "ok")
    what = {"gap": "returns the secret", "miss": "withholds the secret"}.get(verdict)
    return {"probe_id": e["probe_id"], "path": f"paper_{e['axis']}", "principal": "tenant key",
            "relation": e["relation"], "trust": None, "visibility": e["visibility"],
            "expected": expected, "verdict": verdict, "what": what, "cross_tenant": False}
