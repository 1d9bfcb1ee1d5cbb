"""The faults table: per profile, the faults injected, what the harness retried and what the
history checkers found, from the `faults_*` views of metrics.sql (one run per profile: the
canonical faults run, i.e. the latest complete one unless runs were selected)."""

from __future__ import annotations

import pandas as pd

from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.section import REPRODUCTION, Context, Fragment, SectionOutput, finish
from fleetprobe.analysis.base.tables import Table, markdown

KEY, TITLE = "faults", "Faults"
EXPERIMENTS = ("faults",)
VIEWS = ("faults_injected", "faults_outages", "faults_retries", "faults_failed_attempts",
         "faults_checks")

CHECKERS = ("no_lost_writes", "bounded_staleness", "supersession_acyclic", "one_active_head",
            "no_duplicate_rows", "provenance_intact", "failures_accounted")
NO_RUNS = ("No faults runs yet: run `make faults` (params/reference/faults.yaml under each "
           "governed profile, as params/extended.yaml lists them).")


def faults_frame(results: Results) -> pd.DataFrame:
    """One row per profile's canonical faults run (empty frame when there is none)."""
    runs = results.canonical[results.canonical.experiment == "faults"]
    if runs.empty:
        return pd.DataFrame()
    ids = list(runs.run_id)
    injected = results.view("faults_injected", ids)
    outages = results.view("faults_outages", ids)
    retries = results.view("faults_retries", ids).set_index("run_id")
    failed = results.view("faults_failed_attempts", ids).set_index("run_id")
    checks = results.view("faults_checks", ids)
    rows = []
    for run in runs.sort_values("profile").itertuples():
        mine = injected[injected.run_id == run.run_id]
        kinds = mine.groupby("fault_kind").n.sum()
        down = outages[outages.run_id == run.run_id].down_ms
        retry = retries.loc[run.run_id] if run.run_id in retries.index else None
        bad = failed.loc[run.run_id] if run.run_id in failed.index else None
        judged = checks[checks.run_id == run.run_id].set_index("checker")
        green = [c for c in CHECKERS if c in judged.index and bool(judged.loc[c, "ok"])]
        red = [f"{c} ({int(judged.loc[c, 'violations'])})" for c in CHECKERS
               if c in judged.index and not bool(judged.loc[c, "ok"])]
        missing = [c for c in CHECKERS if c not in judged.index]
        rows.append({
            "profile": run.profile,
            "faults injected": int(kinds.sum()) if not kinds.empty else 0,
            "by kind": ", ".join(f"{k} {int(n)}" for k, n in kinds.items()) or "-",
            "kill -9 (down ms)": (f"{len(down)} ({', '.join(f'{d:.0f}' for d in down)})"
                                  if len(down) else "0"),
            "5xx / resets seen": (f"{int(bad.answered_5xx)} / {int(bad.transport_errors)}"
                                  if bad is not None else "0 / 0"),
            "retried": (f"{int(retry.retried)}/{int(retry.requests)} requests, "
                        f"{int(retry.extra_attempts)} extra attempts"
                        if retry is not None else "-"),
            "failed after retries": int(retry.failed) if retry is not None else 0,
            "checkers green": f"{len(green)}/{len(CHECKERS)}",
            "violations": "; ".join(red + [f"{c} (not run)" for c in missing]) or "none",
            "complete": bool(run.complete),
            "run": run.run_id,
        })
    return pd.DataFrame(rows)


def faults_table(results: Results) -> Table:
    frame = faults_frame(results)
    note = NO_RUNS if frame.empty else (
        "Each row is a profile's latest complete faults run: the contradiction and provenance "
        "workloads through a fault-injecting transport (5xx, 429, resets before and after the "
        "server answered, added latency) while the bundled server is killed with SIGKILL and "
        "restarted on the same database. Checkers judge the recorded events only "
        "(fleetprobe.oracle.checkers); "
        "expected on every governed profile: nothing lost, all green.")
    return Table("faults", "Faults: injected faults, retries and history checkers per profile",
                 frame, note, VIEWS)


def markdown_section(table: Table) -> str:
    """The REPRODUCTION.md section (the paper has no faults experiment: no verdicts)."""
    body = f"_{table.note}_" if table.empty else (
        markdown(table.frame.drop(columns=["complete"])) + f"\n\n{table.note}")
    return f"## {table.title}\n\n{body}\n"


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        table = faults_table(results)
        runs = tuple(results.canonical[results.canonical.experiment == "faults"].run_id)
        fragment = markdown_section(table)
    finally:
        results.con.close()
    output = SectionOutput(
        KEY, TITLE,
        "Not a claim of the paper: the contradiction and provenance workloads under injected "
        "faults (5xx, 429, resets, latency, kill -9 of the server), judged by history checkers "
        "that read the recorded events only.",
        tables={table.name: table}, fragments=[Fragment(REPRODUCTION, 100, fragment)],
        notes=[table.note] if table.empty else [], notebook="faults.ipynb", views=VIEWS,
        runs=runs)
    return finish(output, context)
