"""Between-seed spread of the governance matrix (issue 36), from metrics.sql
`matrix_seed_cells` and `matrix_seed_totals`.

A target with complete runs on two or more seeds of one world (its params but the seed): per
path family (the heatmap's columns), all matrix paths together and the paper's probe design,
gaps/n on each seed, the range of the gap rate, the pooled rate, on how many seeds the
dimension has a gap, whether that verdict (a gap or none) changes with the seed, and how many
principal x path cells judged on every seed change class (a gap on some seeds, none on
others). And the `hardened` profile's zero: its gaps on every seed and world it ran on, with n
and the 95% Wilson upper bound, beside the seed and world it was built on.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from fleetprobe.analysis.base.labels import describe_world, path_family
from fleetprobe.analysis.base.stats import fmt_rate, rate
from fleetprobe.analysis.base.tables import markdown, on_page
from fleetprobe.analysis.sections.matrix.common import FAMILIES, order

SPREAD, ZERO = "matrix_seed_spread", "matrix_hardened_zero"
SPREAD_VIEWS, ZERO_VIEWS = ("matrix_seed_cells",), ("matrix_seed_totals",)
HARDENED = "hardened"
ALL_PATHS = "all matrix paths"
# the paper's probe design (7.1): k of the probes the paper expects denied, as
# matrix_paper_rates counts them
PAPER = {"paper_get": "paper design: tenant-key GET", "paper_search": "paper design: search"}
SPREAD_COLUMNS = ["target", "world", "dimension", "seeds", "per seed (seed: gaps/n)",
                  "range", "pooled", "gap on", "changes with the seed",
                  "cells changing class", "kit commits (seeds)"]
ZERO_COLUMNS = ["seed", "world", "built on", "run_id", "kit commit", "gaps/judged",
                "95% upper bound", "gap paths", "misses", "paper design search leak"]


def load(con: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(the cells of targets with two or more seeds in a world, every run's totals, the
    canonical runs' worlds) from the views."""
    cells = con.execute("SELECT * FROM matrix_seed_cells WHERE seeds >= 2 ORDER BY ALL").df()
    totals = con.execute("SELECT * FROM matrix_seed_totals ORDER BY ALL").df()
    canonical = con.execute("SELECT s.profile, s.world, s.seed FROM matrix_seed_runs s "
                            "JOIN matrix_canonical c USING (run_id) ORDER BY ALL").df()
    return cells, totals, canonical


def describe(world: str) -> str:
    """A world in a few words, its moved agents named (the spread's worlds differ by them)."""
    return describe_world(world, moved_agents=True)


def dimension(path: str) -> str:
    return PAPER.get(path) or path_family(path)


def spread_frame(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per (target, world, dimension) of `matrix_seed_cells` rows on two or more
    seeds; n is judged probes (the paper's design: probes it expects denied)."""
    if cells.empty:
        return pd.DataFrame(columns=SPREAD_COLUMNS)
    cells = cells.assign(dimension=cells.path.map(dimension),
                         n=cells.denied.where(cells.path.isin(list(PAPER)), cells.n))
    matrix = cells[~cells.path.isin(list(PAPER))].assign(dimension=ALL_PATHS)
    rows = []
    for (profile, world), group in pd.concat([cells, matrix]).groupby(["profile", "world"]):
        names = [d for d in (*FAMILIES, ALL_PATHS, *PAPER.values())
                 if d in set(group.dimension)]
        for name in names:
            rows.append(_row(profile, world, name, group[group.dimension == name]))
    frame = pd.DataFrame(rows, columns=["profile", *SPREAD_COLUMNS[1:]])
    rank = {t: i for i, t in enumerate(order(list(frame.profile.unique())))}
    frame = frame.sort_values("profile", key=lambda s: s.map(rank), kind="stable")
    return frame.rename(columns={"profile": "target"}).reset_index(drop=True)


def _row(profile: str, world: str, name: str, cells: pd.DataFrame) -> dict[str, object]:
    per_seed = cells.groupby("seed")[["gaps", "n"]].sum().astype(int)
    seeds = [int(s) for s in per_seed.index]
    rates = [rate(int(r.gaps), int(r.n)) for r in per_seed.itertuples()]
    values = [r.value for r in rates if r.n]
    found = [r.k > 0 for r in rates]
    return {
        "profile": profile, "world": describe(world), "dimension": name, "seeds": len(seeds),
        "per seed (seed: gaps/n)": ", ".join(f"{s}: {r.k}/{r.n}"
                                             for s, r in zip(seeds, rates, strict=True)),
        "range": f"{min(values):.4f}-{max(values):.4f}" if values else "-",
        "pooled": fmt_rate(rate(int(per_seed.gaps.sum()), int(per_seed.n.sum()))),
        "gap on": f"{sum(found)}/{len(found)} seeds",
        "changes with the seed": "yes" if len(set(found)) > 1 else "no",
        "cells changing class": _changing_cells(cells, len(seeds)),
        "kit commits (seeds)": commits(cells)}


def commits(cells: pd.DataFrame) -> str:
    """The kit commits the runs were made from, each with its seeds: `abc1234 (11); ...`."""
    by = cells.groupby(cells.kit_commit.fillna("unrecorded"))["seed"].unique()
    return "; ".join(f"{c} ({', '.join(str(int(s)) for s in sorted(seeds))})"
                     for c, seeds in by.items())


def _changing_cells(cells: pd.DataFrame, seeds: int) -> str:
    """Of the principal x path cells judged on every seed, how many have a gap on some seeds
    and none on others."""
    judged = cells[cells.n > 0]
    by_cell = judged.groupby(["principal", "path"]).agg(
        seeds=("seed", "nunique"), with_gap=("gaps", lambda g: int((g > 0).sum())))
    everywhere = by_cell[by_cell.seeds == seeds]
    changing = everywhere[(everywhere.with_gap > 0) & (everywhere.with_gap < seeds)]
    return f"{len(changing)}/{len(everywhere)}"


def zero_frame(totals: pd.DataFrame, canonical: pd.DataFrame,
               profile: str = HARDENED) -> pd.DataFrame:
    """The profile's runs on every seed and world: gaps of judged probes, the 95% Wilson
    upper bound of the gap rate, misses, the paper design's search leak, and whether it is
    the seed and world of the profile's canonical run (the one it was built on)."""
    mine = totals[totals.profile == profile]
    home = canonical[canonical.profile == profile]
    built = (str(home.world.iloc[0]), int(home.seed.iloc[0])) if len(home) else None
    rows = []
    for r in mine.sort_values(["seed", "world"]).itertuples():
        gaps = rate(int(r.gaps), int(r.judged))
        other = [] if built is None else [
            what for what, same in (("seed", int(r.seed) == built[1]),
                                    ("world", r.world == built[0])) if not same]
        rows.append({
            "seed": int(r.seed), "world": describe(r.world),
            "built on": "unknown" if built is None else
            "yes (canonical seed and world)" if not other else "no: other " + " and ".join(
                other),
            "run_id": r.run_id, "kit commit": r.kit_commit or "unrecorded",
            "gaps/judged": f"{gaps.k}/{gaps.n}",
            "95% upper bound": f"{gaps.high:.5f}" if gaps.n else "-",
            "gap paths": r.gap_paths if isinstance(r.gap_paths, str) else "-",
            "misses": int(r.misses),
            "paper design search leak": fmt_rate(rate(int(r.search_leaks),
                                                      int(r.search_denied)))
            if r.search_denied else "not run (paper_fleets: 0)"})
    return pd.DataFrame(rows, columns=ZERO_COLUMNS)


def section(spread: pd.DataFrame, zero: pd.DataFrame, profile: str = HARDENED) -> str:
    """MATRIX.md's seed spread and the profile's zero, in words the tables back."""
    parts = ["## Between-seed spread", ""]
    if spread.empty:
        parts += ["_No target has complete matrix runs on two or more seeds of one world "
                  "(params/seeds-matrix.yaml makes them)._", ""]
    else:
        same = spread[spread["range"].map(lambda r: len(set(r.split("-"))) == 1)]
        changed = spread[spread["changes with the seed"] == "yes"]
        full = spread[spread.dimension == ALL_PATHS]
        mixed = full[full["kit commits (seeds)"].str.contains(";")]
        parts += [
            "Each target with complete runs on two or more seeds of one world (its params but "
            "the seed; a run on another seed than the headline seed is a repeat, reported "
            "above only for a target with no run on the headline seed): per path family, all "
            "matrix paths and the paper's probe design (n = probes the paper expects "
            "denied), gaps/n on each seed, the range of the gap rate over seeds, the pooled "
            "rate with its 95% Wilson interval, on how many seeds the dimension has a gap and "
            "whether that verdict changes with the seed; `cells changing class`: of the "
            "principal x path cells judged on every seed, those with a gap on some seeds and "
            "none on others. "
            f"{len(full)} target/world group(s), {int(full.seeds.sum())} runs; "
            f"{len(same)} of {len(spread)} rows give the same gap rate on every seed; "
            f"{len(changed)} change verdict with the seed"
            + (": " + "; ".join(f"{r.target} ({r.world}) {r.dimension}"
                                for r in changed.itertuples()) if len(changed) else "")
            + "." + (f" In {len(mixed)} of {len(full)} groups the runs were made from more "
                     "than one kit commit (`kit commits`): there the spread may mix the seed "
                     "with what changed in the code between those commits (`git diff` of "
                     "reference_server/ and lib/fleetprobe/experiments/ tells): "
                     + "; ".join(f"{r.target} ({r.world})" for r in mixed.itertuples()) + "."
                     if len(mixed) else ""),
            "", on_page(spread, SPREAD), ""]
    parts += [f"## The `{profile}` profile on other seeds and worlds", ""]
    if zero.empty:
        return "\n".join([*parts, f"_No complete `{profile}` matrix run._", ""])
    counts = zero["gaps/judged"].str.split("/", expand=True).astype(int)
    pooled = rate(int(counts[0].sum()), int(counts[1].sum()))
    others = (zero["built on"] != "yes (canonical seed and world)").sum()
    found = zero[counts[0] > 0]
    parts += [
        f"Gaps of judged matrix probes in every complete `{profile}` run: {len(zero)} run(s), "
        f"{others} of them on a seed or world other than its canonical run's; pooled "
        f"{pooled.k}/{pooled.n} (95% Wilson upper bound {pooled.high:.5f}); "
        + ("no run has a gap. " if found.empty else f"{len(found)} run(s) have gaps: " + "; ".join(
            f"seed {r['seed']}, {r['world']}: {r['gaps/judged']} on {r['gap paths']}"
            for _, r in found.iterrows()) + ". ")
        + "The paper "
        "design's tenant-key GET exposure is not a gap of the policy (the tenant key may read "
        "its tenant's rows) and is left out.", "", markdown(zero), ""]
    return "\n".join(parts)
