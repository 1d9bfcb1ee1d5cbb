"""`fleetprobe judge RUN [--policy FILE]`: every verdict of a recorded run again, from its
requests and answers alone, with no server (docs/judge.md).

Each experiment's judgements are pure functions of the history (the same functions the run
used when it recorded them) and, for `matrix`, `dynamics` and `leakage`, of the policy
(`fleetprobe.oracle.policy`, a data file). A judgement is either a field of the observation event
itself (`inline`: e.g. a leakage probe's `expected`, `leak`, `miss`) or an event of its own
derived from earlier ones (`derived`: e.g. a matrix `verdict`, a contradiction `check`), which
is compared with the recorded one of the same phase at the same position. What a run
observed (the row in an answer, a canary seen) is taken as recorded: the answer's body is not
kept, so it cannot be judged again; `OBSERVED` names those fields and the summary counts them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetprobe.experiments import contradiction, propagation, provenance
from fleetprobe.experiments.dynamics import check as dynamics_check
from fleetprobe.experiments.leakage import check as leakage_check
from fleetprobe.experiments.leakage import plan as leakage_plan
from fleetprobe.experiments.matrix import check as matrix_check
from fleetprobe.experiments.separation import check as separation_check
from fleetprobe.harness.trace import JUDGEMENT_FIELDS, read_event_lines
from fleetprobe.oracle import checkers, policy

Event = dict[str, Any]
Derived = Callable[[list[Event], Mapping[str, Any]], dict[str, list[Event]]]
Inline = Callable[[Event], Event]
MAX_EXAMPLES = 3
MAX_TALLIED = 12  # a field with more distinct values is shown by its differences only


class JudgeError(ValueError):
    """A run directory that cannot be judged (the message says why)."""


@dataclass(frozen=True)
class Judging:
    """How one experiment's verdicts are recomputed."""

    derived: Derived | None = None
    inline: Mapping[str, Inline] = field(default_factory=dict)
    by_policy: bool = False  # the policy file decides some of them


# -- per experiment: the run's own checker functions, applied to the recorded history ------

def _of(events: Iterable[Event], phase: str) -> list[Event]:
    return [e for e in events if e["phase"] == phase]


def _leakage_probe(e: Event) -> Event:
    if e["phase"] == "probe":
        expected = leakage_plan.expected_bulk(e["secret_scope"], e["relation"])
    else:
        expected = leakage_plan.expected_agent_get(e.get("relation"), e.get("trust"))
    return {"expected": expected, **leakage_check.judge(expected, e.get("returned"))}


def _contradiction_write(e: Event) -> Event:
    answered = e.get("status") is not None
    return {"admitted": (e["status"] == 201) if answered else None,
            "reject_reason": contradiction.reject_reason(e["status"], e.get("error"))
            if answered else None}


def _contradiction_checks(events: list[Event], _: Mapping[str, Any]) -> dict[str, list[Event]]:
    def of(phase: str, fact: str, scenario: str) -> list[Event]:
        return [e for e in events if e["phase"] == phase and e["fact_id"] == fact
                and e["scenario"] == scenario]

    return {"check": [{"fact_id": c["fact_id"], "scenario": c["scenario"],
                       **contradiction.judge_fact_run(
                           of("write", c["fact_id"], c["scenario"]),
                           of("refetch", c["fact_id"], c["scenario"]))}
                      for c in _of(events, "check")]}


def _provenance_chains(events: list[Event], _: Mapping[str, Any]) -> dict[str, list[Event]]:
    admitted = provenance._admitted_writes(_of(events, "write"))  # noqa: SLF001
    walks = _of(events, "walk")
    return {"chain": [provenance.grade_chain(
        c["chain_id"], c["depth_planned"], admitted.get(c["chain_id"], {}),
        [w for w in walks if w["chain_id"] == c["chain_id"]]) for c in _of(events, "chain")]}


def _faults_checks(events: list[Event], params: Mapping[str, Any]) -> dict[str, list[Event]]:
    results = checkers.check_all(events, params.get("staleness_window_s", 0.5),
                                 params.get("kill_slack_s", 2.0))
    return {"check": [r.as_event() for r in results]}


JUDGINGS: dict[str, Judging] = {
    "leakage": Judging(inline={p: _leakage_probe for p in ("probe", "agent_probe", "reprobe")},
                       by_policy=True),
    "contradiction": Judging(derived=_contradiction_checks, inline={
        "write": _contradiction_write,
        "stale_read": lambda e: {"stale": contradiction.is_stale(e.get("active_rows"))}}),
    "provenance": Judging(derived=_provenance_chains),
    "propagation": Judging(inline={
        "probe": lambda e: {"leak": propagation.judge_probe(
            e["reader_relation"], e.get("visible"))["leak"]},
        "redistribute": lambda e: {"flipped": propagation.judge_flip(
            e.get("agent_id_after"), e["target_agent"])}}),
    "faults": Judging(derived=_faults_checks),
    "separation": Judging(derived=lambda ev, _: separation_check.judgements(ev)),
    "matrix": Judging(derived=lambda ev, _: {"verdict": matrix_check.judge(ev)},
                      by_policy=True),
    "dynamics": Judging(derived=lambda ev, _: {"verdict": dynamics_check.judge(ev)},
                        by_policy=True),
}

# What a run observed and records as such ("<phase>.<field>"): the judgements above start
# from these; they are taken as recorded, since the answers' bodies are not kept.
OBSERVED: dict[str, dict[str, str]] = {
    "leakage": {f"{p}.returned": "the probed row (id or canary) in the answer"
                for p in ("probe", "agent_probe", "reprobe")},
    "contradiction": {
        "stale_read.active_rows": "rows of the fact-run an active-only search returned",
        "refetch.observed_status": "the row's status on its re-fetch",
        "refetch.observed_supersedes_id": "the row's supersedes_id on its re-fetch"},
    "provenance": {"walk.writer_observed": "the writer a walk's GET showed",
                   "walk.parent_observed": "the parent a walk's GET showed"},
    "propagation": {"probe.visible": "the canary in the search answer",
                    "window.visible": "the canary in the search answer",
                    "redistribute.agent_id_after": "the owner a GET showed afterwards"},
    "faults": {"write.acknowledged": "a 2xx with an id",
               "read.found": "a read-back's 200 with that id"},
    "matrix": {"probe.returned": "the answer returned, revealed or changed the row",
               "probe.got": "what else the answer showed"},
    "dynamics": {"probe.returned": "the answer returned, revealed or changed the row",
                 "inflight.written_at": "created_at of the rows an in-flight bulk wrote"},
}


# -- judging a run ----------------------------------------------------------------------

@dataclass
class Tally:
    """One judgement field: how often recorded and re-judged agree, and the values."""

    compared: int = 0
    differ: int = 0
    old_values: Counter[Any] = field(default_factory=Counter)
    new_values: Counter[Any] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def add(self, event: Event, old: Any, new: Any) -> None:
        self.compared += 1
        self.old_values[_hashable(old)] += 1
        self.new_values[_hashable(new)] += 1
        if old != new:
            self.differ += 1
            if len(self.examples) < MAX_EXAMPLES:
                self.examples.append(f"{_event_key(event)}: {_show(old)} -> {_show(new)}")

    @property
    def recorded(self) -> Counter[str]:
        return Counter({_show(k): n for k, n in self.old_values.items()})

    @property
    def rejudged(self) -> Counter[str]:
        return Counter({_show(k): n for k, n in self.new_values.items()})


@dataclass
class Rejudged:
    run_id: str
    experiment: str
    policy: str
    events: list[Event]
    tallies: dict[str, Tally]  # "<phase>.<field>" -> tally
    unmatched: list[str]  # judgement events recorded or re-judged without a counterpart
    observed: Counter[str]  # "<phase>.<field>" taken as recorded -> events carrying it

    @property
    def differences(self) -> int:
        return sum(t.differ for t in self.tallies.values()) + len(self.unmatched)


def _hashable(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, list | dict) else value


def _show(value: Any) -> str:
    return "null" if value is None else json.dumps(value) if not isinstance(value, str) \
        else value


_PRIMITIVE = (str, int, float, bool, type(None))


def _plain(fields: Event) -> Event:
    """As the trace writes it (tuples become lists, other objects text)."""
    if all(isinstance(v, _PRIMITIVE) for v in fields.values()):
        return fields
    return json.loads(json.dumps(fields, default=str))


def _tally(tallies: dict[str, Tally], name: str) -> Tally:
    found = tallies.get(name)
    if found is None:
        found = tallies[name] = Tally()
    return found


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], list[Event]]:
    run_dir = Path(run_dir)
    manifest_file = run_dir / "manifest.json"
    if not manifest_file.is_file():
        raise JudgeError(f"{run_dir} is not a run directory (no manifest.json); pass "
                         "data/traces/<run>")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    return manifest, [json.loads(line) for line in read_event_lines(run_dir)]


def _event_key(e: Event) -> str:
    for name in ("probe_id", "chain_id", "fact_id", "checker", "account", "memory_id"):
        if e.get(name) is not None:
            return f"{e['phase']} {name}={e[name]}"
    return f"{e['phase']} seq={e.get('seq')}"


def rejudge_events(experiment: str, events: list[Event], params: Mapping[str, Any],
                   tables: policy.PolicyTables | None = None) -> Rejudged:
    """Every judgement of `events` again under `tables` (default: the default policy)."""
    judging = JUDGINGS.get(experiment)
    if judging is None:
        raise JudgeError(f"no judge for experiment {experiment!r} (known: "
                         f"{', '.join(sorted(JUDGINGS))})")
    tables = tables or policy.DEFAULT
    with policy.using(tables):
        derived = judging.derived(events, params) if judging.derived else {}
        out = [dict(e) for e in events]
        tallies: dict[str, Tally] = {}
        for e in out:
            rule = judging.inline.get(e["phase"])
            if rule is None:
                continue
            new = _plain(rule(e))
            if e.get("not_applicable"):  # not applicable: every judgement null (EVENTS.md)
                new = {k: None if k in JUDGEMENT_FIELDS else v for k, v in new.items()}
            for name, value in new.items():
                _tally(tallies, f"{e['phase']}.{name}").add(e, e.get(name), value)
            e.update(new)
    unmatched: list[str] = []
    for phase, judged in derived.items():
        recorded = [e for e in out if e["phase"] == phase]
        for old, new in zip(recorded, judged, strict=False):
            new = _plain(new)
            for name, value in new.items():
                _tally(tallies, f"{phase}.{name}").add(old, old.get(name), value)
            old.update(new)
        unmatched += [f"recorded {_event_key(e)} not re-judged" for e in recorded[len(judged):]]
        unmatched += [f"re-judged {phase} #{i} not recorded"
                      for i in range(len(recorded), len(judged))]
    watched: dict[str, list[str]] = {}
    for name in OBSERVED.get(experiment, {}):
        watched.setdefault(name.partition(".")[0], []).append(name.partition(".")[2])
    observed: Counter[str] = Counter()
    for e in events:
        for fieldname in watched.get(e["phase"], ()):
            if fieldname in e:
                observed[f"{e['phase']}.{fieldname}"] += 1
    run_id = events[0]["run_id"] if events else "(no events)"
    return Rejudged(run_id, experiment, f"{tables.name} ({tables.source})", out, tallies,
                    unmatched, observed)


def rejudge(run_dir: str | Path, tables: policy.PolicyTables | None = None) -> Rejudged:
    manifest, events = read_run(run_dir)
    return rejudge_events(manifest["experiment"], events, manifest.get("params") or {},
                          tables)


def summary(r: Rejudged, verbose: bool = False) -> str:
    """Per judgement field: recorded vs re-judged counts, differences with examples."""
    lines = [f"{r.run_id} ({r.experiment}), judged again under policy {r.policy}: "
             f"{r.differences} difference(s)"]
    for name, t in sorted(r.tallies.items()):
        small = len(t.old_values | t.new_values) <= MAX_TALLIED
        if t.differ == 0 and not verbose:
            counts = f" ({_counts(t.recorded)})" if small else ""
            lines.append(f"  {name}: {t.compared} judged, same{counts}")
            continue
        lines.append(f"  {name}: {t.compared} judged, {t.differ} differ")
        if small:
            lines.append(f"    recorded:  {_counts(t.recorded)}")
            lines.append(f"    re-judged: {_counts(t.rejudged)}")
        lines += [f"    e.g. {x}" for x in t.examples]
    lines += [f"  {u}" for u in r.unmatched[:MAX_EXAMPLES]]
    if r.observed:
        why = OBSERVED.get(r.experiment, {})
        lines.append("  observations, taken as recorded (the answers' bodies are not kept):")
        lines += [f"    {name}: {n} events ({why[name]})"
                  for name, n in sorted(r.observed.items())]
    return "\n".join(lines)


def _counts(c: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(c.items())) or "none"


def write_events(r: Rejudged, out: str | Path) -> Path:
    """The run's events with every judgement re-judged, as JSON lines."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for e in r.events:
            f.write(json.dumps(e) + "\n")
    return out
