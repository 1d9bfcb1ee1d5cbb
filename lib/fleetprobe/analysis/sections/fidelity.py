"""Fidelity (issue 21): the matrix under profile `memclaw-2.29` against MemClaw's engine, cell
by cell. A registered slot: the engine work fills it (reports/FIDELITY.md and its table);
until then the section says that nothing has been measured, and why."""

from __future__ import annotations

from fleetprobe.analysis.base.section import Context, SectionOutput, finish

KEY, TITLE = "fidelity", "Fidelity (engine)"
NOT_YET = ("Not measured yet: no engine runs are in the traces and no comparison is built "
           "(issue 21 adds the `engine` target and this section's cell-by-cell comparison).")


def build(context: Context) -> SectionOutput:
    return finish(SectionOutput(KEY, TITLE, NOT_YET), context)
