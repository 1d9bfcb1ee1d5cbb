"""History checkers: pure functions of a run's recorded events (`events.jsonl`).

Each takes the list of event dicts (as `Trace.read_events` returns them) and returns a
`CheckResult`: how many things it judged and every violation it found, each a short
sentence naming the ids involved. Nothing here talks to a server or reads the plan.

The events they read (EVENTS.md, section `faults`):
  `write`   a logical write: `request_id`, `acknowledged`, `memory_id`, `answered_at`
  `read`    a read-back of an acknowledged write: `write_request_id`, `memory_id`,
            `sent_at`, `found`, and the common `status`
  `audit`   one per row stored at the end (read with a client no fault touches):
            `memory_id`, `request_id`, `subject_entity_id`, `predicate`, `row_status`,
            `supersedes_id`
  `attempt` one per HTTP attempt the fault transport saw: `request_id`, `attempt`,
            `fault_id`, `sent_at`, `answered_at`, and the common `status` / `error`
  `fault`   one per injected fault: `fault_id`, `fault_kind` (`kill` and `restart` bracket
            a server outage)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

LIVE_STATUSES = frozenset({"active", "confirmed", "pending"})
MAX_EXAMPLES = 5

Event = dict[str, Any]


@dataclass(frozen=True)
class CheckResult:
    checker: str
    checked: int
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_event(self) -> dict[str, Any]:
        """Fields of the `check` event that records this result."""
        return {"checker": self.checker, "ok": self.ok, "checked": self.checked,
                "violations": len(self.violations),
                "examples": self.violations[:MAX_EXAMPLES]}


def _phase(events: Iterable[Event], phase: str) -> list[Event]:
    return [e for e in events if e.get("phase") == phase]


def _ts(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def no_lost_writes(events: list[Event]) -> CheckResult:
    """Every acknowledged write (2xx with an id) is among the rows stored at the end."""
    stored = {e["memory_id"] for e in _phase(events, "audit")}
    acked = [e for e in _phase(events, "write") if e.get("acknowledged")]
    lost = [f"write {e['request_id']} acknowledged as {e['memory_id']} is not stored"
            for e in acked if e["memory_id"] not in stored]
    return CheckResult("no_lost_writes", len(acked), lost)


def no_duplicate_rows(events: list[Event]) -> CheckResult:
    """Retries never duplicate a row: at most one stored row per logical write (its
    idempotency key), and that row is the one the write was acknowledged with."""
    rows: dict[str, list[str]] = defaultdict(list)
    for e in _phase(events, "audit"):
        if e.get("request_id"):
            rows[e["request_id"]].append(e["memory_id"])
    violations = [f"write {rid} is stored {len(ids)} times: {', '.join(sorted(ids))}"
                  for rid, ids in sorted(rows.items()) if len(ids) > 1]
    writes = _phase(events, "write")
    for e in writes:
        ids = rows.get(e["request_id"], [])
        if e.get("acknowledged") and len(ids) == 1 and ids[0] != e["memory_id"]:
            violations.append(f"write {e['request_id']} was acknowledged as {e['memory_id']} "
                              f"but stored as {ids[0]}")
    return CheckResult("no_duplicate_rows", len(writes), violations)


def bounded_staleness(events: list[Event], window_s: float) -> CheckResult:
    """A read that starts more than `window_s` after a write was acknowledged sees it.
    Reads that got no definitive answer (transport error, 5xx, 429 after retries) are not
    judged; reads inside the window are not judged either."""
    acked = {e["request_id"]: e for e in _phase(events, "write") if e.get("acknowledged")}
    judged, stale = 0, []
    for read in _phase(events, "read"):
        write = acked.get(read.get("write_request_id"))
        if write is None or read.get("status") not in (200, 404):
            continue
        sent, answered = _ts(read.get("sent_at")), _ts(write.get("answered_at"))
        if sent is None or answered is None or sent - answered <= window_s:
            continue
        judged += 1
        if not read.get("found"):
            stale.append(f"read {read['request_id']} started {sent - answered:.3f} s after "
                         f"write {write['request_id']} and did not see {write['memory_id']}")
    return CheckResult("bounded_staleness", judged, stale)


def supersession_acyclic(events: list[Event]) -> CheckResult:
    """Following `supersedes_id` from any stored row never returns to a row already seen."""
    edges = {e["memory_id"]: e.get("supersedes_id") for e in _phase(events, "audit")}
    cycles, settled = [], set()
    for start in sorted(edges):
        path: list[str] = []
        on_path: set[str] = set()
        node: str | None = start
        while node is not None and node not in settled:
            if node in on_path:
                loop = path[path.index(node):]
                cycles.append("supersession cycle: " + " -> ".join([*loop, node]))
                break
            path.append(node)
            on_path.add(node)
            node = edges.get(node)
        settled.update(path)
    return CheckResult("supersession_acyclic", len(edges), sorted(set(cycles)))


def one_active_head(events: list[Event]) -> CheckResult:
    """Exactly one live row per (subject, predicate) that carries a triple, once detection
    has settled: older values are outdated, the newest stands."""
    live: dict[tuple[str, str], list[str]] = defaultdict(list)
    keys: set[tuple[str, str]] = set()
    for e in _phase(events, "audit"):
        if not (e.get("subject_entity_id") and e.get("predicate")):
            continue
        key = (e["subject_entity_id"], e["predicate"].lower())
        keys.add(key)
        if e.get("row_status") in LIVE_STATUSES:
            live[key].append(e["memory_id"])
    violations = [f"subject {s} predicate {p}: {len(live.get((s, p), []))} active rows "
                  f"({', '.join(sorted(live.get((s, p), []))) or 'none'})"
                  for s, p in sorted(keys) if len(live.get((s, p), [])) != 1]
    return CheckResult("one_active_head", len(keys), violations)


def failures_accounted(events: list[Event], kill_slack_s: float = 2.0) -> CheckResult:
    """Every 5xx and every transport error (reset, refused connection) the harness saw is
    accounted for: caused by an injected fault (its `fault_id`) or inside a server outage
    (between a `kill` and `kill_slack_s` after its `restart`), and then either retried
    (a later attempt of the same request) or reported as the request's final failure."""
    faults = _phase(events, "fault")
    outages = []
    kills = {e["fault_id"]: _ts(e["ts"]) for e in faults if e.get("fault_kind") == "kill"}
    for e in faults:
        if e.get("fault_kind") == "restart":
            began = kills.get(str(e["fault_id"]).removesuffix("r"))
            if began is not None:
                outages.append((began, _ts(e["ts"]) + kill_slack_s))
    open_kills = set(kills) - {str(e["fault_id"]).removesuffix("r") for e in faults
                               if e.get("fault_kind") == "restart"}
    outages += [(kills[k], float("inf")) for k in open_kills]
    attempts = _phase(events, "attempt")
    last_attempt: dict[str, int] = defaultdict(int)
    for a in attempts:
        if a.get("request_id"):
            last_attempt[a["request_id"]] = max(last_attempt[a["request_id"]], a["attempt"])
    outcome = {e["request_id"]: e for e in events
               if e.get("phase") in ("write", "read") and e.get("request_id")}
    failed = [a for a in attempts if a.get("status") is None or a["status"] >= 500]
    violations = []
    for a in failed:
        what = f"attempt {a['attempt']} of {a.get('request_id')} ({a.get('error')})"
        answered = _ts(a.get("answered_at"))
        in_outage = answered is not None and any(lo <= answered <= hi for lo, hi in outages)
        if not a.get("fault_id") and not in_outage:
            violations.append(f"{what} has no injected fault and no outage to explain it")
            continue
        rid = a.get("request_id")
        retried = rid is not None and last_attempt[rid] > a["attempt"]
        final = outcome.get(rid) if rid else None
        reported = final is not None and not (200 <= (final.get("status") or 0) < 300)
        if not retried and not reported:
            violations.append(f"{what} was neither retried nor reported as a failure")
    return CheckResult("failures_accounted", len(failed), violations)


def provenance_intact(events: list[Event]) -> CheckResult:
    """Every acknowledged write that named a parent is stored still naming it
    (`metadata.derived_from`), and the parent is stored too: no chain broken by a retry,
    a replay or a restart."""
    stored = {e["memory_id"]: e for e in _phase(events, "audit")}
    linked = [e for e in _phase(events, "write") if e.get("acknowledged") and e.get("parent_id")]
    violations = []
    for e in linked:
        row = stored.get(e["memory_id"])
        if row is None:
            continue  # no_lost_writes reports it
        if row.get("parent_id") != e["parent_id"]:
            violations.append(f"write {e['request_id']} ({e['memory_id']}) names parent "
                              f"{row.get('parent_id')}, not {e['parent_id']}")
        elif e["parent_id"] not in stored:
            violations.append(f"write {e['request_id']}: parent {e['parent_id']} is not stored")
    return CheckResult("provenance_intact", len(linked), violations)


Checker = Callable[[list[Event]], CheckResult]


def check_all(events: list[Event], window_s: float, kill_slack_s: float) -> list[CheckResult]:
    """Every checker, in report order."""
    return [
        no_lost_writes(events),
        bounded_staleness(events, window_s),
        supersession_acyclic(events),
        one_active_head(events),
        no_duplicate_rows(events),
        provenance_intact(events),
        failures_accounted(events, kill_slack_s),
    ]
