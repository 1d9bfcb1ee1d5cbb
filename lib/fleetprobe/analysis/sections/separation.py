"""The separation section of the report: one figure, one table, and what cannot be measured.

Figure: contamination rate (queries whose answer held a record from a partition outside the
agent's authorised set) by target and `top_k`, with 95% Wilson intervals. Table: per target,
absence, Axis's fan-out attribution, insights, reserved types and graph reach. Every number
is a metric view of metrics.sql (separation section), read through `Results`.

One run per target: runs named with `--run` first, else the latest complete run with the
most accounts, else the latest run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from fleetprobe.analysis.base.section import Context, FigureOutput, SectionOutput, finish
from fleetprobe.analysis.base.stats import Rate, fmt_rate, rate
from fleetprobe.analysis.base.tables import Table, latex, markdown

KEY, TITLE = "separation", "Separation"
EXPERIMENTS = ("separation",)

NAME = "separation"
FIGURE = "fig_separation_contamination"
VIEWS = ("separation_contamination", "separation_absence", "separation_attribution",
         "separation_reserved", "separation_insight_read", "separation_underlying_read",
         "separation_graph_restricted", "separation_graph_insight",
         "separation_insights_generated")
TABLE = "separation"
NO_RUNS = ("No separation runs yet: run `make reproduce`, or `python -m fleetprobe run "
           "separation --params params/reference/separation.yaml`.")
ABSENCE_STATEMENT = (
    "An empty answer means \"no record in authorized partitions\", never \"clear across "
    "domains\": on hold-only accounts Vera's recall returns nothing about the legal hold "
    "under a governed profile, exactly as it would for an account with no legal record at "
    "all. Whether an account is clear is a question for the legal agent.")
LLM_STATEMENT = (
    "What this kit cannot measure without a language model: whether a model that receives "
    "restricted records in its context would reveal them, paraphrase them, or act on them "
    "despite a prompt telling it not to (the article's prompt-level failure mode), and how "
    "that changes with model capability. The kit measures the precondition only: how often "
    "restricted records enter the retrieval result at all. A contamination rate of 0 means "
    "the model is never handed the record; a rate above 0 means prompt instructions are the "
    "only remaining barrier. Insight summaries here are deterministic (structural conflicts "
    "with attribution), not a model's synthesis.")


@dataclass
class SeparationSection:
    runs: pd.DataFrame
    table: pd.DataFrame
    figure: FigureOutput | None = None
    caption: str = ""
    note: str = ""
    statements: tuple[str, ...] = (ABSENCE_STATEMENT, LLM_STATEMENT)

    @property
    def empty(self) -> bool:
        return self.runs.empty


def target_label(profile: str | None, target_kind: str | None) -> str:
    profile = profile or "unknown"
    return profile if target_kind in (None, "reference") else f"{target_kind}: {profile}"


def pick_runs(runs: pd.DataFrame, selected: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """One separation run per target (profile x target kind)."""
    runs = runs[runs.experiment == NAME].copy()
    if runs.empty:
        return runs.assign(target=pd.Series(dtype=str), accounts=pd.Series(dtype=int))
    runs["accounts"] = [int(json.loads(p or "{}").get("accounts") or 0) for p in runs.params]
    runs["target"] = [target_label(p, k) for p, k in zip(runs.profile, runs.target_kind,
                                                         strict=True)]
    runs["chosen"] = runs.run_id.isin(list(selected))
    runs["order"] = runs.started_at.fillna("") + runs.run_id
    runs = runs.sort_values(["chosen", "complete", "accounts", "order"],
                            ascending=[False, False, False, False])
    return (runs.groupby("target", sort=True).head(1).sort_values("target")
            .drop(columns=["chosen", "order"]).reset_index(drop=True))


def _rates(con, view: str, run_ids: list[str], by: tuple[str, ...] = ()) -> pd.DataFrame:
    frame = con.execute(f'SELECT * FROM "{view}"').df()
    frame = frame[frame.run_id.isin(run_ids)]
    keys = ["run_id", *by]
    return frame.groupby(keys, as_index=False)[["numerator", "denominator"]].sum()


def _rate_of(frame: pd.DataFrame, run_id: str, **where: object) -> Rate | None:
    rows = frame[frame.run_id == run_id]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    if rows.empty:
        return None
    return rate(int(rows.numerator.sum()), int(rows.denominator.sum()))


def contamination_frame(con, runs: pd.DataFrame) -> pd.DataFrame:
    per_k = _rates(con, "separation_contamination", list(runs.run_id), ("top_k",))
    rows = []
    for run in runs.itertuples():
        for r in per_k[per_k.run_id == run.run_id].sort_values("top_k").itertuples():
            value = rate(int(r.numerator), int(r.denominator))
            rows.append({"target": run.target, "top_k": int(r.top_k), "k": value.k,
                         "n": value.n, "rate": value.value, "low": value.low,
                         "high": value.high, "run_id": run.run_id})
    return pd.DataFrame(rows)


def summary_table(con, runs: pd.DataFrame) -> pd.DataFrame:
    ids = list(runs.run_id)
    absence = _rates(con, "separation_absence", ids)
    attribution = _rates(con, "separation_attribution", ids, ("mode", "top_k"))
    summary_named = con.execute("SELECT run_id, mode, top_k, summary_named AS numerator, "
                                "denominator FROM separation_attribution").df()
    fanout_ks = sorted(int(k) for k in attribution.top_k.dropna().unique())
    reserved = _rates(con, "separation_reserved", ids)
    insight = _rates(con, "separation_insight_read", ids, ("agent",))
    underlying = _rates(con, "separation_underlying_read", ids)
    graph = _rates(con, "separation_graph_restricted", ids)
    observable = con.execute("SELECT run_id, observable_probes FROM "
                             "separation_graph_restricted").df()
    graph_insight = _rates(con, "separation_graph_insight", ids)
    generated = con.execute("SELECT * FROM separation_insights_generated").df()
    rows = []
    for run in runs.itertuples():
        gen = generated[generated.run_id == run.run_id]
        fanout = {}
        for k in fanout_ks:
            fanout |= {
                f"fan-out blended, top_k={k}: both parties, right fleet (fields)":
                    fmt_rate(_rate_of(attribution, run.run_id, mode="blended", top_k=k)),
                f"fan-out per-fleet, top_k={k}: both parties, right fleet (labels)":
                    fmt_rate(_rate_of(attribution, run.run_id, mode="per_fleet", top_k=k)),
                f"fan-out blended, top_k={k}: from the summary text alone":
                    fmt_rate(_rate_of(summary_named, run.run_id, mode="blended", top_k=k)),
            }
        rows.append({
            "target": run.target,
            "accounts": run.accounts,
            "absence: no record in authorized partitions (Vera, hold-only)":
                fmt_rate(_rate_of(absence, run.run_id)),
            **fanout,
            "insights generated": "-" if gen.empty else
                f"{int(gen.findings.iloc[0])} (HTTP {int(gen.status.iloc[0])})"
                if pd.notna(gen.status.iloc[0]) else "no answer",
            "insight read by Vera (GET + search)":
                fmt_rate(_rate_of(insight, run.run_id, agent="vera")),
            "insight read by Lex (GET + search)":
                fmt_rate(_rate_of(insight, run.run_id, agent="lex")),
            "other domain's underlying record read by id":
                fmt_rate(_rate_of(underlying, run.run_id)),
            "reserved types refused (422 INVALID_ARGUMENTS, route named)":
                fmt_rate(_rate_of(reserved, run.run_id)),
            "graph-reached rows outside the caller's partitions":
                fmt_rate(_rate_of(graph, run.run_id))
                if observable[observable.run_id == run.run_id].observable_probes.sum()
                else "not observable (the server reports no retrieval paths)",
            "graph surfaced Axis's insight (Vera, conflict accounts)":
                fmt_rate(_rate_of(graph_insight, run.run_id)),
            "run": run.run_id,
        })
    return pd.DataFrame(rows)


def draw_figure(frame: pd.DataFrame, out_dir: Path) -> FigureOutput:
    """Bars per target within each top_k group, with Wilson whiskers; a zero bar says 0."""
    # matplotlib in the section's process only: the notebook's kernel imports this module for
    # `show` and unpickles SeparationSection without drawing
    import matplotlib.pyplot as plt

    from fleetprobe.analysis.base.figures import PNG_ONLY, save, style

    targets = sorted(frame.target.unique())
    ks = sorted(frame.top_k.unique())
    width = 0.8 / max(len(targets), 1)
    with style():
        fig, ax = plt.subplots(figsize=(9, 5), layout="constrained")
        for i, target in enumerate(targets):
            rows = frame[frame.target == target].set_index("top_k").reindex(ks)
            xs = [j + (i - (len(targets) - 1) / 2) * width for j in range(len(ks))]
            err = [(rows.rate - rows.low).fillna(0).tolist(),
                   (rows.high - rows.rate).fillna(0).tolist()]
            ax.bar(xs, rows.rate.fillna(0), width=width * 0.95, yerr=err, capsize=2,
                   label=target)
            for x, value in zip(xs, rows.rate, strict=True):
                if value == 0:  # a zero bar has no height: say so
                    ax.text(x, 0.015, "0", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(ks)), [str(k) for k in ks])
        ax.set(xlabel="top_k (records requested per query)",
               ylabel="contaminated queries (fraction, 95% Wilson CI)", ylim=(0, 1.05))
        ax.legend(title="target", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        ns = "; ".join(f"{t}: n = {', '.join(str(int(n)) for n in frame[frame.target == t].n)}"
                       for t in targets)
        caption = ("Share of Vera's and Lex's recall and search queries about an account whose "
                   "answer held at least one record from a partition outside the agent's "
                   f"authorised set, per top_k. Queries per bar (top_k ascending): {ns}.")
        return save(fig, out_dir, FIGURE,
                    "Separation: queries whose answer held a restricted record", caption,
                    ("separation_contamination",), formats=PNG_ONLY)


def build(context: Context) -> SectionOutput:
    """The separation figure and table, and the section of the page."""
    results = context.results(EXPERIMENTS)
    try:
        section = summarize(results, context.out_dir)
    finally:
        results.con.close()
    table = Table(TABLE, TABLE, section.table, " ".join(section.statements), VIEWS)
    figures = {FIGURE: replace(section.figure, title=FIGURE.replace("_", " "), note="")
               } if section.figure is not None else {}
    output = SectionOutput(
        KEY, TITLE,
        "Not a claim of the paper: how often restricted records enter Vera's (sales) and "
        "Lex's (legal) retrieval at all, per target and top_k; absence, Axis's fan-out "
        "attribution, insights, reserved types and graph reach.",
        tables={TABLE: table}, figures=figures, notes=[section.note] if section.note else [],
        files=table_files(section), notebook="separation.ipynb",
        runs=tuple(section.runs.run_id),
        views=VIEWS,
        data={"separation": section})
    return finish(output, context)


def summarize(results, out_dir: Path) -> SeparationSection:
    """The runs, the table and the figure (to be written under out_dir/figures)."""
    runs = pick_runs(results.runs, tuple(results.selected))
    if runs.empty:
        return SeparationSection(runs, pd.DataFrame(), note=NO_RUNS)
    frame = contamination_frame(results.con, runs)
    figure = draw_figure(frame, Path(out_dir) / "figures") if not frame.empty else None
    return SeparationSection(runs, summary_table(results.con, runs), figure,
                             figure.caption if figure else "",
                             note="" if figure else "separation runs hold no judged "
                             "contamination queries yet")


def table_files(section: SeparationSection) -> dict[str, bytes]:
    """tables/separation.csv, .md (measures as rows) and .tex."""
    title = "Separation (Vera, Lex, Axis): absence, fan-out, insights, reserved types"
    statements = "\n\n".join(section.statements)
    if section.empty:
        md = f"## {title}\n\n_{section.note}_\n\n{statements}\n"
        tex = f"% {section.note}\n"
    else:
        body = markdown(section.table.set_index("target").T.reset_index(),
                        headers=["measure", *section.table.target])
        md = (f"## {title}\n\nRates k/n = value [95% Wilson CI].\n\n{body}\n\n"
              f"{section.caption}\n\n{statements}\n")
        tex = latex(section.table, title, "tab:separation")
    return {f"tables/{TABLE}.{ext}": text.encode() for ext, text in
            (("csv", section.table.to_csv(index=False)), ("md", md), ("tex", tex))}


def show(section: SeparationSection) -> None:
    """Notebook display: the figure, the table (measures as rows) and the statements."""
    from IPython.display import Image, Markdown, display

    if section.empty:
        display(Markdown(f"_{section.note}_"))
    else:
        png = (section.figure.files.get(f"figures/{FIGURE}.png")
               if section.figure is not None else None)
        display(Image(data=png) if png else Markdown(f"_{section.note}_"))
        display(section.table.set_index("target").T)
    display(Markdown("\n\n".join(section.statements)))
