"""The dynamics checker: every probe judged by the timed policy
(`fleetprobe.oracle.policy.Timeline`) at the moment the server answered, from the recorded
events only.

The world before the first change is the census (`census_agent`, `census_row`, as the matrix
records it; an expiring row's own `census_row` carries its `expires_at`). Each acknowledged
`change` event becomes a `policy.Change` at its `answered_at`: a deleted agent speaks for
nobody and its credential is revoked; a re-created agent is a new incarnation
(`<key>#<generation>`) that owns nothing its predecessor wrote; a revoked key speaks for
nobody; a trust or home change is the record the target answered with; a deleted row is
deleted; a redistributed row has the receiving agent as owner. Verdicts:

- `leak`: the answer returned (revealed, wrote) what the policy at that moment denies;
  `forget` marks those whose row was deleted or expired by then (a forget failure);
- `miss`: a path that must return the row withheld what the policy allows (reads only);
- `refused`: a write the policy allows was refused;
- `stale`: a path that promises to hide superseded and outdated rows (search, recall, a
  recall summary) returned one the policy at that moment holds superseded or past its
  `ts_valid_end` (allowed, but no longer current: not a leak);
- `ok`, `n/a` (the change could not be made on this target), `error` (no answer).

Every verdict also carries `expected_late`: the decision in the world with every change
requested by the answer applied, so a read in flight across a change (sent before it,
answered after) that returned what that world denies can be counted.

In-flight verdicts (`path` `bulk_inflight`): one per in-flight bulk, `leak` when rows were
written under the agent's id after the change that withdrew its grant was acknowledged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fleetprobe.oracle import policy
from fleetprobe.oracle.policy import ALLOW, DENY, Change, Principal, Row, Timeline
from fleetprobe.world.answers import endpoint_absent
from fleetprobe.world.census import world_from


def timeline_from(events: list[dict[str, Any]]) -> tuple[Timeline, dict[str, str]]:
    """The timed world, and each change's acknowledgement time by `change_id` (its last
    acknowledged step)."""
    principals, rows = world_from(events)
    for e in events:
        if e["phase"] == "census_row" and (e.get("expires_at") or e.get("valid_end")):
            rows[e["row_key"]] = replace(rows[e["row_key"]], expires_at=e.get("expires_at"),
                                         valid_end=e.get("valid_end"))
    changes: list[Change] = []
    acked: dict[str, str] = {}
    current = dict(principals)
    for e in events:
        if e["phase"] != "change" or not e.get("applied"):
            continue
        acked[e["change_id"]] = e["answered_at"]
        c = _change(e, current, rows)
        if c is None:
            continue
        changes.append(c)
        if c.principal is not None:
            current[c.principal] = c.state
    return Timeline(principals, rows, changes), acked


def _change(e: dict[str, Any], principals: dict[str, Principal | None],
            rows: dict[str, Row]) -> Change | None:
    step, who, sent, at = e.get("step"), e.get("who"), e["sent_at"], e["answered_at"]
    if step == "delete" and e.get("row_key"):
        row = rows.get(e["row_key"])
        return Change(sent, at, row=e["row_key"], row_state=row and replace(row, deleted=True))
    if step == "delete":
        return Change(sent, at, principal=who, state=None, credential=e.get("credential"))
    if step == "revoke":
        return Change(sent, at, credential=e.get("credential"))
    if step in ("expire", "valid_end"):  # nothing to apply: the time is in the census
        return None
    if step == "supersede":  # the earlier row as the later write makes it (the policy's
        # word, not the target's: its detector is judged by the answers after it)
        row = rows.get(e["row_key"])
        return Change(sent, at, row=e["row_key"],
                      row_state=row and replace(row, status=e.get("row_status") or "outdated"))
    before = principals.get(who) if who else None
    if step == "recreate" and who:
        generation = int((e.get("credential") or "#0").rsplit("#", 1)[1]) + 1
        tenant = before.tenant if before else who.split(".")[0]
        return Change(sent, at, principal=who, state=Principal(
            tenant, "agent", f"{who}#{generation}", e.get("trust") or 0, e.get("home")))
    if step == "trust" and before is not None:
        return Change(sent, at, principal=who, state=replace(
            before, trust=e.get("trust"), home=e.get("home")))
    if step == "redistribute":  # the row as read back afterwards (MemClaw promotes it)
        row = rows.get(e["row_key"])
        return Change(sent, at, row=e["row_key"], row_state=row and replace(
            row, owner=who, visibility=e.get("visibility") or row.visibility))
    return None


def judge(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    timeline, acked = timeline_from(events)
    kinds = {e["change_id"]: e.get("change") for e in events if e["phase"] == "change"}
    verdicts = [judge_probe(e, timeline, acked.get(e["change_id"]), kinds.get(e["change_id"]))
                for e in events if e["phase"] == "probe"]
    verdicts += [judge_inflight(e, acked.get(e["change_id"]), kinds.get(e["change_id"]))
                 for e in events if e["phase"] == "inflight"]
    return verdicts


def _ms(t: str, since: str | None) -> float | None:
    if since is None:
        return None
    from datetime import datetime

    def parse(s: str) -> datetime:
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    return round((parse(t) - parse(since)).total_seconds() * 1000, 3)


def _verdict(e: dict[str, Any], kind: str | None, acked: str | None, expected: str | None,
             verdict: str, what: str | None, forget: bool = False,
             late: str | None = None) -> dict[str, Any]:
    t = e.get("answered_at")
    since = _ms(t, acked) if t else None
    sent = _ms(e["sent_at"], acked) if e.get("sent_at") and acked else None
    when = ("before" if since is None or since < 0 else
            "after" if sent is not None and sent >= 0 else "during")
    return {"change_id": e["change_id"], "change": kind, "probe_id": e["probe_id"],
            "path": e["path"], "family": e.get("family"), "who": e.get("who"),
            "row_key": e.get("row_key"), "credential": e.get("credential"), "when": when,
            "since_change_ms": since, "expected": expected, "verdict": verdict, "what": what,
            "forget": forget, "returned": bool(e.get("returned")), "expected_late": late,
            "inflight": bool(e.get("inflight"))}


def judge_probe(e: dict[str, Any], timeline: Timeline, acked: str | None,
                kind: str | None) -> dict[str, Any]:
    absent = endpoint_absent(e)
    if absent or e.get("not_applicable"):
        return _verdict(e, kind, acked, None, "n/a", absent or e.get("not_applicable"))
    if e.get("status") is None:
        return _verdict(e, kind, acked, None, "error", e.get("error") or "no answer")
    t, path = e["answered_at"], e["path"]
    world = timeline.at(t)
    row = world.rows.get(e["row_key"])
    if row is None:
        return _verdict(e, kind, acked, None, "error", "subject not observed")
    named = [f or None for f in (e.get("fleets") or "").split(",")] if e.get("fleets") else []
    fleet = e.get("got") if e.get("returned") else (named[0] if named else row.fleet)
    expected = policy.decide_at(timeline, e["sent_at"], t, e["who"], e["credential"],
                                e["row_key"], path, fleet)
    late = policy.decide(timeline.at(t, skip_pending=False), e["who"], e["credential"],
                         e["row_key"], path, fleet)
    returned = bool(e.get("returned"))
    rule = policy.active().rules[path]
    if returned and expected == DENY:
        what = {"write": "writes under a withdrawn or lacking grant"}.get(
            rule.kind, "returns the row" if rule.kind == "read" else "reveals the row")
        return _verdict(e, kind, acked, expected, "leak", what, forget=row.deleted, late=late)
    p = world.grant(e["who"], e["credential"])
    if (not returned and expected == ALLOW and rule.kind == "read" and p is not None
            and policy.must_return(path, row, ALLOW, tuple(named), p.agent_id)):
        return _verdict(e, kind, acked, expected, "miss", "withholds the row", late=late)
    if not returned and expected == ALLOW and rule.kind == "write":
        return _verdict(e, kind, acked, expected, "refused", "refuses an allowed write",
                        late=late)
    if returned and policy.stale(row, path):
        return _verdict(e, kind, acked, expected, "stale",
                        f"returns a row {row.status} by then", late=late)
    return _verdict(e, kind, acked, expected, "ok", None, late=late)


def judge_inflight(e: dict[str, Any], acked: str | None, kind: str | None) -> dict[str, Any]:
    """Rows the in-flight bulk wrote after the grant was withdrawn (server `created_at` after
    the change's acknowledgement): writes the policy at that moment denies."""
    stamps = [s for s in (e.get("written_at") or "").split() if s]
    after = [s for s in stamps if acked is not None and _z(s) > acked]
    verdict = ("error" if e.get("status") is None else
               "n/a" if acked is None else "leak" if after else "ok")
    what = (f"{len(after)} of {len(stamps)} rows written after the change's acknowledgement"
            if acked is not None else "the change was not acknowledged")
    out = _verdict({**e, "probe_id": f"{e['change_id']}.inflight", "path": "bulk_inflight",
                    "family": "in flight", "row_key": None}, kind, acked,
                   DENY if after else None, verdict, what)
    out["since_change_ms"] = _ms(_z(max(after)), acked) if after else None
    out["n_after"] = len(after)
    out["returned"] = bool(after)
    return out


def _z(stamp: str) -> str:
    """A server timestamp in the trace's form (UTC, microseconds, `Z`) to compare as text."""
    from datetime import UTC, datetime

    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
