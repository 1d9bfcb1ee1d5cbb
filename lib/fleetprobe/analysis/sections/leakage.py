"""Leakage (paper 8.1, 9.1): scope enforcement by path. The leakage envelope (Fig. 2), search
latency (Fig. 3), which write/search variant gives the paper's 72/164, the agent-scoped
GET-by-id probe (Table 3) and the remediation re-probe."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fleetprobe.analysis.base.figures import (
    PAPER_STATE,
    FigureOutput,
    bars_with_ci,
    canonical_runs,
    distribution,
    n_by_group,
    none_note,
    paper_latency,
    paper_state_run,
    plt,
    profile_order,
    save,
    sns,
    style,
)
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.section import (
    REPRODUCTION,
    Context,
    Fragment,
    SectionOutput,
    from_parts,
)
from fleetprobe.analysis.base.stats import Rate, fmt_rate, rate
from fleetprobe.analysis.base.tables import (
    Table,
    empty_note,
    k_of_n,
    markdown_or_note,
    per_canonical_run,
    readable_trust_and_relation,
)

KEY, TITLE = "leakage", "Leakage"
EXPERIMENTS = ("leakage",)
PAPER_SEARCH_LEAK = ((72, 164), (4, 28))


def build(context: Context) -> SectionOutput:
    results = context.results(EXPERIMENTS)
    try:
        tables = [search_leak_hypothesis(results), table3(results), reprobe(results)]
        out = context.out_dir / "figures"
        with style():
            figures = [fig2_leakage_envelope(results, out), fig3_search_latency(results, out)]
        hypothesis = tables[0].frame
        fragment = "\n".join([
            "## Search-leak hypothesis (paper 8.1; docs/search-leak.md)", "",
            "Which write/search variant yields the paper's 72/164 search leaks and 4/28 misses:",
            "", markdown_or_note(hypothesis, "no leakage run measured search"), "",
            _hypothesis_conclusion(hypothesis)])
        return from_parts(
            KEY, TITLE,
            "Scope enforcement by path: the tenant key's GET-by-id exposure and the search "
            "leak per write/search variant (Fig. 2), search latency (Fig. 3), which variant "
            "gives the paper's 72/164, the agent-scoped GET-by-id probe and the remediation "
            "re-probe.",
            context, tables, figures,
            fragments=[Fragment(REPRODUCTION, 20, fragment)],
            paper="8.1; 9.1", notebook="leakage.ipynb",
            runs=canonical_runs(results, "leakage").run_id)
    finally:
        results.con.close()


def search_leak_hypothesis(results: Results) -> Table:
    frame = hypothesis_frame(results)
    return Table("search_leak_hypothesis",
                 "Search-leak hypothesis: variant_write x variant_search", frame,
                 empty_note(frame, "no leakage run with search probes") or
                 "Paper 8.1: search leak 72/164, search miss 4/28.",
                 ("leakage_search_leak", "leakage_search_miss"))


def table3(results: Results) -> Table:
    """Table 3, the agent-scoped GET-by-id probe, for every profile's canonical leakage run."""
    frame = per_canonical_run(results, "leakage", "leakage_table3")
    if not frame.empty:
        frame["result"] = frame.returned.astype(str) + "/" + frame.probes.astype(str) + \
            " returned (HTTP " + frame.statuses.fillna("none") + ")"
        frame = frame.sort_values(["profile", "credential", "trust", "relation"],
                                  ascending=[True, False, True, True], na_position="first")
        frame = readable_trust_and_relation(frame)[
            ["profile", "credential", "trust", "relation", "expected", "result", "run_id"]]
    return Table("table3", "Table 3: agent-scoped GET-by-id probe", frame,
                 empty_note(frame, "no leakage run with agent_probe events") or
                 "Paper (2026-05-30): every row HTTP 200, including trust-1 cross-fleet.",
                 ("leakage_table3",))


def reprobe(results: Results) -> Table:
    """The 9.1 remediation re-probe: returned k/n by trust x relation, per profile."""
    frame = per_canonical_run(results, "leakage", "leakage_reprobe")
    paper = {(1, "cross_fleet"): "0/36", (2, "cross_fleet"): "36/36", (1, "same_fleet"): "12/12"}
    if not frame.empty:
        frame["returned"] = [k_of_n(k, n) for k, n in zip(frame.returned, frame.probes,
                                                           strict=True)]
        frame["paper (2026-05-31)"] = [
            paper.get((t, r), "not reported (the paper's 12/12 is the trust-1 half)"
                      if r == "same_fleet" else "") for t, r in
            zip(frame.trust, frame.relation, strict=True)]
        frame = readable_trust_and_relation(frame.sort_values(["profile", "trust", "relation"]))[
            ["profile", "trust", "relation", "expected", "returned", "leaks", "statuses",
             "paper (2026-05-31)", "run_id"]]
    return Table("reprobe", "Remediation re-probe counts (paper 9.1)", frame,
                 empty_note(frame, "no leakage run with reprobe events") or
                 "Paper: total leaks 0/96. The paper's 12/12 same-fleet controls are the "
                 "trust-1 half of the 24 same-fleet probes (4 fleets x 3 rows at trust 1 and "
                 "at trust 2); the trust-2 half is measured here but has no paper value, and "
                 "96 = 36 + 36 + 12 + 12 counts both halves.",
                 ("leakage_reprobe",))



# ------------------------------------------------------------------------------ hypothesis


def hypothesis_frame(results: Results) -> pd.DataFrame:
    """Search leak and miss k/n per (run, variant_write, variant_search), and whether it
    gives the paper's 72/164 and 4/28 (exactly, and by Wilson overlap)."""
    rates = results.rates
    runs = results.comparison_runs("leakage")
    rows = []
    for (run_id, write, search), group in rates[rates.run_id.isin(runs.run_id)].groupby(
            ["run_id", "variant_write", "variant_search"], dropna=True):
        by_metric = group.set_index("metric")
        leak = _rate_of(by_metric, "leakage_search_leak")
        miss = _rate_of(by_metric, "leakage_search_miss")
        if leak is None and miss is None:
            continue
        (paper_leak, paper_miss) = (rate(*PAPER_SEARCH_LEAK[0]), rate(*PAPER_SEARCH_LEAK[1]))
        exact = (leak is not None and miss is not None
                 and (leak.k, leak.n) == PAPER_SEARCH_LEAK[0]
                 and (miss.k, miss.n) == PAPER_SEARCH_LEAK[1])
        overlap = bool(leak and miss and leak.overlaps(paper_leak) and miss.overlaps(paper_miss))
        rows.append({"run_id": run_id, "profile": group.profile.iloc[0],
                     "variant_write": write, "variant_search": search,
                     "search_leak": fmt_rate(leak), "search_miss": fmt_rate(miss),
                     "gives 72/164 and 4/28": "exactly" if exact else
                     ("within CI" if overlap else "no")})
    return pd.DataFrame(rows, columns=["run_id", "profile", "variant_write", "variant_search",
                                       "search_leak", "search_miss", "gives 72/164 and 4/28"])


def _rate_of(by_metric: pd.DataFrame, metric: str) -> Rate | None:
    if metric not in by_metric.index:
        return None
    row = by_metric.loc[metric]
    return rate(int(row.numerator), int(row.denominator))


def _hypothesis_conclusion(table: pd.DataFrame) -> str:
    if table.empty:
        return "Not tested: no leakage run with search probes."
    exact = table[table["gives 72/164 and 4/28"] == "exactly"]
    if exact.empty:
        return "No measured variant gives exactly 72/164 and 4/28."
    found = sorted({f"`{r.variant_write}` x `{r.variant_search}` ({r.profile})"
                    for r in exact.itertuples()})
    return "Exactly 72/164 and 4/28: " + "; ".join(found) + "."



# ------------------------------------------------------------------------------ figures


def fig2_leakage_envelope(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig2_leakage_envelope", "Fig. 2: leakage envelope by path and profile"
    frame = _leakage_rates(results)
    if frame.empty:
        return FigureOutput(name, title, note=none_note("leakage", "probes"))
    variants = _search_variants(results)
    panels = [p for p in ("GET-by-id", "search") if p in set(frame.axis)]
    fig, axd = plt.subplot_mosaic([["a", "b"], ["c", "legend"]], figsize=(11, 8.2),
                                  layout="constrained")
    panel_titles = {"GET-by-id": "(a) GET-by-id, tenant key",
                    "search": "(b) search, documented variant\n(secret with fleet_id, probe "
                              "sends fleet_ids)"}
    for key, axis in zip("ab", panels, strict=False):
        ax, part = axd[key], frame[frame.axis == axis]
        order = ["exposure", "miss"] if axis == "GET-by-id" else ["leak", "miss"]
        bars_with_ci(ax, part, x="signal", x_order=order, hue="profile",
                      hue_order=profile_order(part.profile))
        ax.set(title=panel_titles[axis], xlabel="", ylabel="rate (95% Wilson CI)",
               ylim=(0, 1.18))
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
    for key in "ab"[len(panels):]:
        axd[key].axis("off")  # a path the runs did not probe
    legend_ax = axd["legend"]
    legend_ax.axis("off")
    # the profile legend alone fills its cell (30-odd labels); panel (c)'s stays inside (c),
    # whose bars leave the upper half empty
    legend_ax.legend(handles, labels, title="profile (panels a, b)", loc="center left",
                     frameon=False, fontsize=8, ncol=2 if len(labels) > 6 else 1)
    if variants.empty:
        axd["c"].axis("off")
    else:
        ax = axd["c"]
        names = list(dict.fromkeys(variants.variant))
        bars_with_ci(ax, variants, x="signal", x_order=["leak", "miss"], hue="variant",
                      hue_order=names, palette=["0.6", *sns.color_palette("dark", len(names) - 1)])
        ax.set(title=f"(c) search, every variant measured ({PAPER_STATE})", xlabel="",
               ylabel="rate (95% Wilson CI)", ylim=(0, 1.18))
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
        ax.legend(handles, labels, title="secret write x probe search", loc="upper center",
                  frameon=False, fontsize=8, ncol=2)
    for key in ("a", "b", "c"):
        axd[key].tick_params(axis="x", labelsize=10)
    caption = ("Rates over the probes expected to be denied (exposure, leak) or allowed (miss); "
               "k/n above each bar, whiskers are 95% Wilson intervals. Each profile's canonical "
               "leakage run, probes per bar: " + n_by_group(frame, ["axis", "signal"],
                                                             "profile") + ".")
    if not variants.empty:
        caption += (" Panel (c): every write/search variant the paper-state run measured, beside "
                    "the paper's numbers (grey, memclaw.net): "
                    + n_by_group(variants, ["signal"], "variant") + ".")
    return save(fig, out_dir, name, title, caption,
                 ("leakage_get_exposure", "leakage_get_miss", "leakage_search_leak",
                  "leakage_search_miss"))


def fig3_search_latency(results: Results, out_dir: Path) -> FigureOutput:
    name, title = "fig3_search_latency", "Fig. 3: search latency distribution"
    run = paper_state_run(results, "leakage")
    if run is None:
        return FigureOutput(name, title, note=none_note("leakage", "search probes"))
    write, search = results.headline_variant
    probes = results.view("leakage_probes", [run.run_id])
    values = probes[(probes.axis == "search") & probes.status.notna()
                    & (probes.variant_write == write) & (probes.variant_search == search)]
    return distribution(name, title, out_dir, values.latency_ms,
                         results.measured_latency("leakage_search_latency", run.run_id),
                         "search latency (ms)", "search probes (count)", run,
                         f"Answered search probes of the documented variant ({write} x {search}).",
                         views=("leakage_probes", "leakage_search_latency"),
                         paper=paper_latency(results, "leakage_search_latency"))


def _leakage_rates(results: Results) -> pd.DataFrame:
    """GET-by-id exposure/miss and search leak/miss (documented variant) per canonical run."""
    rows = []
    for run in canonical_runs(results, "leakage").itertuples():
        for axis, signal, metric in (
                ("GET-by-id", "exposure", "leakage_get_exposure"),
                ("GET-by-id", "miss", "leakage_get_miss"),
                ("search", "leak", "leakage_search_leak"),
                ("search", "miss", "leakage_search_miss")):
            r = results.measured_rate(metric, run.run_id)
            if r is not None and r.n:
                rows.append({"profile": run.profile, "axis": axis, "signal": signal,
                             "rate": r.value, "low": r.low, "high": r.high, "k": r.k, "n": r.n})
    return pd.DataFrame(rows)


def _search_variants(results: Results) -> pd.DataFrame:
    """Search leak and miss for every variant the paper-state leakage run measured, after the
    paper's own numbers; empty when that run measured only one variant."""
    run = paper_state_run(results, "leakage")
    if run is None:
        return pd.DataFrame()
    rates = results.rates[(results.rates.run_id == run.run_id)
                          & results.rates.metric.isin(["leakage_search_leak",
                                                       "leakage_search_miss"])]
    rates = rates[rates.variant_write.notna() & rates.variant_search.notna()]
    pairs = sorted(set(zip(rates.variant_write, rates.variant_search, strict=True)),
                   key=lambda p: (p != results.headline_variant, p))
    if len(pairs) < 2:
        return pd.DataFrame()
    claims = {c["metric"]: c for c in results.claims}
    rows = []
    for signal, metric in (("leak", "leakage_search_leak"), ("miss", "leakage_search_miss")):
        if metric in claims:
            rows.append(_rate_row("paper (memclaw.net)", signal,
                                  rate(claims[metric]["k"], claims[metric]["n"])))
        for write, search in pairs:
            r = results.measured_rate(metric, run.run_id, (write, search))
            if r is not None and r.n:
                label = f"{write} x {search}"
                if (write, search) == results.headline_variant:
                    label += " (documented)"
                rows.append(_rate_row(label, signal, r))
    return pd.DataFrame(rows)


def _rate_row(variant: str, signal: str, r) -> dict:
    return {"variant": variant, "signal": signal, "rate": r.value, "low": r.low,
            "high": r.high, "k": r.k, "n": r.n}


