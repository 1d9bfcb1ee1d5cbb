"""The `matrix` checker: a pure function from recorded events to verdicts.

It reads only what was observed: the principals' trust and home fleet (`census_agent`, as
the target reported them, and `observe` after each probe that may change them), the rows'
fleet, visibility, owner, status and deletion (`census_row`), each probe's outcome
(`probe`, `observe`, `paper`) and the answers to probes of ids that do not exist
(`control`), and judges every probe against `fleetprobe.oracle.policy` with the principal as the
target held it when it answered (a probe that re-homed or registered its own agent is judged
as that agent afterwards: the engine changes the agent first, then answers). Verdicts:

- `gap`: the path returned, revealed or changed what the policy denies;
- `miss`: a path that must return the row withheld what the policy allows;
- `refused`: a change the policy allows was refused (stricter than the policy, not a miss);
- `oracle`: a denied probe whose answer tells "exists" from "does not exist": it differs
  from the answer to the same probe of an id that does not exist, or it reveals that a key
  exists without revealing a row (an existence oracle, not a row disclosure);
- `side_effect` (a verdict of its own, `<probe_id>+effect`): the probe changed a principal
  (registered an unknown agent id, re-homed an agent, changed its trust);
- `n/a`: not applicable with the reason: the target has no such endpoint (its own words in
  `what`), a backend answered that it has no equivalent, the probe means nothing under the
  target's credential shape, or the target did not keep what the probe needs (an entity link);
- `error`: no answer (transport error), an answer rejecting the probe as malformed (422:
  a harness defect, never a governance answer), or the probe's subject was never observed;
- `ok`: everything else.
"""

from __future__ import annotations

import re
from typing import Any

from fleetprobe.oracle import policy
from fleetprobe.oracle.policy import ALLOW, DENY, Principal, Row
from fleetprobe.world.answers import EXISTS, endpoint_absent
from fleetprobe.world.census import agent_state, world_from

WHAT_GAP = {
    "read": "returns the row", "reveal": "reveals the row's id", "change": "changes the row",
    "write": "writes into the fleet", "redistribute": "re-homes the row",
    "identity": "reports another identity",
}
WHAT_GAP_PATH = {"agent_read": "returns the agent record",
                 "entity_upsert": "writes an entity into the fleet"}
# what differs between two answers to the same request without telling existence apart: ids,
# and any quoted name (an agent, a fleet, 'none'), which may name the caller, not the row
_IDS = re.compile(r"'[^']*'|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                  re.IGNORECASE)


def malformed(event: dict[str, Any]) -> str | None:
    """The target's words when it rejected the probe's request shape (422 other than a
    reused Idempotency-Key): the harness sent something the target does not take."""
    if event.get("status") != 422:
        return None
    error = event.get("error") or "422"
    return None if "idempotency" in error.lower() else error


def answer_shape(event: dict[str, Any]) -> str:
    """Status and message with every id taken out: what a caller can compare."""
    return _IDS.sub("<id>", event.get("error") or str(event.get("status")))


def principal_label(p: Principal | None, rel: str) -> str:
    if rel == "tenant":
        return "tenant key"
    if rel == "other_tenant" or p is None:
        return "other tenant"
    if not p.registered:
        return f"unregistered {rel}"
    return f"t{p.trust} {rel}"


def judge(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One verdict per `probe` and `paper` event, plus one per observed side effect."""
    principals, rows = world_from(events)
    observed = {e["probe_id"]: e.get("after") for e in events
                if e["phase"] == "observe" and e.get("step") in (None, "row")}
    agents_after = {e["probe_id"]: e for e in events
                    if e["phase"] == "observe" and e.get("step") == "agent"}
    controls = {(e["who"], e["path"], e.get("variant")): answer_shape(e) for e in events
                if e["phase"] == "control" and e.get("status") is not None}
    verdicts = []
    for e in events:  # in the order recorded: one principal's probes ran one after another
        if e["phase"] == "probe":
            effect = _side_effect(e, principals, agents_after.get(e["probe_id"]))
            verdict = judge_probe(e, principals, rows, observed.get(e["probe_id"]), controls)
            verdicts.append(verdict)
            if effect is not None:
                verdicts.append(effect)
        elif e["phase"] == "paper":
            verdicts.append(judge_paper(e))
    return verdicts


def _side_effect(e: dict[str, Any], principals: dict[str, Principal],
                 obs: dict[str, Any] | None) -> dict[str, Any] | None:
    """Update the principal to what the target held after the probe; a verdict if changed."""
    if obs is None or obs.get("status") is None:
        return None
    after = agent_state(obs)
    before = principals.get(obs["who"])
    if after is None or before is None or after == before:
        return None
    principals[obs["who"]] = after
    if not before.registered:
        what = (f"registers the unknown agent id at trust {after.trust}, home "
                f"{after.home or 'none'}")
    elif before.home != after.home:
        what = f"re-homes the agent from {before.home or 'none'} to {after.home or 'none'}"
    else:
        what = f"changes the agent's trust from {before.trust} to {after.trust}"
    return {"probe_id": f"{e['probe_id']}+effect", "path": e["path"],
            "principal": principal_label(before, "own"), "relation": "own",
            "trust": before.trust, "visibility": None, "expected": DENY,
            "verdict": "side_effect", "what": what, "cross_tenant": False}


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
                after: str | None = None,
                controls: dict[tuple[str, str, str | None], str] | None = None
                ) -> dict[str, Any]:
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
    if (bad := malformed(e)) is not None:
        return _verdict(e, p, row, rel, None, "error", f"rejected as malformed: {bad}")
    kind = policy.active().paths[path].kind
    returned = bool(e.get("returned"))
    gap_what = WHAT_GAP_PATH.get(path, WHAT_GAP[kind])
    named = [f or None for f in (e.get("fleets") or "").split(",")] if e.get("fleets") else []
    expected = _expected(e, p, row, principals, named)

    if kind in ("read", "reveal"):
        if returned and expected == DENY:
            return _verdict(e, p, row, rel, expected, "gap", gap_what)
        collateral = _collateral(e, p, rows, row)
        if collateral:
            return _verdict(e, p, row, rel, expected, "gap", collateral)
        oracle = _oracle(e, expected, returned, controls)
        if oracle:
            return _verdict(e, p, row, rel, expected, "oracle", oracle)
        eligible = all(policy.fleet_readable(p, row.tenant, f) for f in named)
        if path == "entity":  # linked rows come back only with an entity the caller may read
            eligible = policy.read(p, policy.entity_record(row.tenant, row.fleet)) == ALLOW
        if kind == "read" and not returned and eligible and policy.must_return(
                path, row, expected, tuple(named), p.agent_id):
            return _verdict(e, p, row, rel, expected, "miss", "withholds the row")
        return _verdict(e, p, row, rel, expected, "ok", None)
    if kind == "identity":
        verdict = "gap" if returned and expected == DENY else "ok"
        return _verdict(e, p, row, rel, expected, verdict, gap_what if verdict == "gap" else None)
    if returned and expected == DENY:
        return _verdict(e, p, row, rel, expected, "gap", gap_what)
    oracle = _oracle(e, expected, returned, controls)
    if oracle:
        return _verdict(e, p, row, rel, expected, "oracle", oracle)
    if not returned and expected == ALLOW:
        return _verdict(e, p, row, rel, expected, "refused", "refuses an allowed change")
    return _verdict(e, p, row, rel, expected, "ok", None)


def _expected(e: dict[str, Any], p: Principal, row: Row, principals: dict[str, Principal],
              named: list[str | None]) -> str:
    kind = policy.active().paths[e["path"]].kind
    if kind in ("read", "reveal"):
        return policy.read(p, row, e["path"])
    if kind == "identity":
        return ALLOW if policy.relation(p, row) == "own" else DENY
    if kind == "change":
        return policy.change(p, row)
    if kind == "redistribute":
        return policy.redistribute(p, row, principals.get(e.get("target") or ""))
    # write: judged on the fleet the row landed in, else the fleet asked for
    fleet = e.get("got") if e.get("returned") else (named[0] if named else row.fleet)
    return policy.write(p, row.tenant, fleet)


def _oracle(e: dict[str, Any], expected: str, returned: bool,
            controls: dict[tuple[str, str, str | None], str] | None) -> str | None:
    """A denied probe whose answer tells that the subject exists: a refusal (4xx) other than
    the one the same request gets for an id that does not exist."""
    if expected != DENY or returned:
        return None
    if e.get("got") == EXISTS:
        return "reveals that the key exists"
    control = (controls or {}).get((e["who"], e["path"], e.get("variant")))
    if control is not None and (e.get("status") or 0) >= 400 and answer_shape(e) != control:
        return f"answers '{answer_shape(e)}', and '{control}' for an id that does not exist"
    return None


def _collateral(e: dict[str, Any], p: Principal, rows: dict[str, Row], row: Row) -> str | None:
    """Other things the answer showed: neighbour rows (contradictions, a near-duplicate
    named in a write's answer), the entity record."""
    got = e.get("got") or ""
    if e["path"] == "entity" and "entity" in got.split():
        if policy.read(p, policy.entity_record(row.tenant, row.fleet)) == DENY:
            return "returns the entity record"
    if e["path"] == "contradictions" or e["path"].startswith("dup_"):
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
