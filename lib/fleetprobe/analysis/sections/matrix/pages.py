"""The matrix's pages: MATRIX.md, a summary a person reads (the heatmap, one line per target,
the cross-tenant tally, the paper's two rates, a link to each target's page), and one page per
target, reports/matrix/<target>.md, with its grid (principal x path family, `gaps/n` per
cell), its paths, its n/a endpoints and reasons, oracles, side effects, census, drift and gap
catalogue. Every row of the long lists is in the CSV under tables/ each page names.
"""

from __future__ import annotations

import pandas as pd

from fleetprobe.analysis.base.labels import path_family
from fleetprobe.analysis.base.tables import PAGE_LIMIT, _slug, markdown, on_page
from fleetprobe.analysis.sections.matrix.common import (
    FAMILIES,
    HEATMAP_FILE,
    PATH_ORDER,
    PRINCIPALS,
    cell_text,
    order,
)

FOLDER = "matrix"
INTRO = (
    "Every principal (tenant key; agent keys at trust 0-3 by relation to the row; another "
    "tenant) x every path, judged against the declarative policy in "
    "`lib/fleetprobe/oracle/policy.py` (the paper's Inv-Scope). A gap: the path returned, "
    "revealed or changed what the policy denies. A miss: a path that must return the row "
    "withheld it. Refused: a change the policy allows was refused (stricter, not a miss). "
    "Oracle: a denied probe whose answer tells that the row or key exists (it differs from "
    "the answer for an id that does not exist). Side effect: a probe that registered, "
    "re-homed or re-trusted a principal (not a probe of its own: probe counts leave it "
    "out). Incomplete runs say why (`incomplete_reason`, `shortfalls`).")
# the long lists: (title, table name, text above, what an empty list says), each on the
# target's page; every target's rows in tables/<name>.csv
LISTS = (
    ("Endpoints the target lacks (n/a)", "matrix_not_applicable", "", "none: every path "
     "answered"),
    ("Probes not applicable, by reason", "matrix_na_reasons", "", "none"),
    ("Existence oracles", "matrix_oracles", "A denied probe whose answer tells \"exists\" "
     "from \"does not exist\" (`what` quotes both answers).", "none (a run recorded before "
     "the matrix rework has no oracle verdicts at all)"),
    ("Side effects", "matrix_side_effects", "Probes that changed a principal as the target "
     "answered them.", "none (a run recorded before the matrix rework has no side-effect "
     "verdicts at all)"),
    ("Entity census", "matrix_entity_census", "Entities read back after the rows were "
     "written, the rows their linked_memories list, and the rows whose link the target did "
     "not keep (their entity probes are n/a).", "no entity census in this run (a run takes "
     "one since the matrix rework)"),
    ("Principals the probes changed (drift)", "matrix_agent_drift", "", "none: every agent "
     "kept its trust and home fleet"),
)


def page_name(target: str) -> str:
    """reports/matrix/<slug>.md of a target (its label as a file name)."""
    return f"{FOLDER}/{_slug(target)}.md"


def _md(frame: pd.DataFrame, empty: str) -> str:
    return markdown(frame) if not frame.empty else f"_{empty}_"


def _whole_or_first(frame: pd.DataFrame, name: str, empty: str) -> str:
    """A list on a target's page: whole while it is at most a quarter of PAGE_LIMIT, else its
    first rows and the CSV that holds every row."""
    if frame.empty:
        return f"_{empty}_"
    text = markdown(frame)
    return text if len(text.encode()) <= PAGE_LIMIT // 4 else on_page(frame, name)


def target_grid(cells: pd.DataFrame) -> pd.DataFrame:
    """One target's matrix_cells as text: a row per principal, a column per path family,
    each cell `gaps/n` (n = judged probes; `+k m` for misses; `-` where none was judged)."""
    frame = cells.assign(family=cells.path.map(path_family))
    sums = frame.groupby(["principal", "family"])[["n", "gaps", "misses"]].sum()
    whos = [p for p in PRINCIPALS if p in set(cells.principal)]
    whos += sorted(set(cells.principal) - set(whos))
    rows = []
    for who in whos:
        row = {"principal": who}
        for family in FAMILIES:
            n, gaps, misses = (sums.loc[(who, family)] if (who, family) in sums.index
                               else (0, 0, 0))
            row[family] = cell_text(int(gaps), int(n), int(misses))
        rows.append(row)
    return pd.DataFrame(rows, columns=["principal", *FAMILIES])


def path_counts(cells: pd.DataFrame) -> pd.DataFrame:
    """One target's paths: judged probes, gaps, misses, refused, oracles, n/a (matrix_cells
    summed over principals), in the policy's path order."""
    columns = ["n", "gaps", "misses", "refused", "oracles", "na"]
    sums = cells.groupby("path")[columns].sum().astype(int)
    rank = {p: i for i, p in enumerate(PATH_ORDER)}
    sums = sums.loc[sorted(sums.index, key=lambda p: (rank.get(p, len(rank)), p))]
    return sums.rename(columns={"n": "judged", "na": "n/a"}).reset_index()


def summary_document(summ: pd.DataFrame, cross: pd.DataFrame, papers: pd.DataFrame,
                     cells: pd.DataFrame, catalogue_rows: int, seeds: str = "") -> str:
    """MATRIX.md: what a person reads first; every target's detail on its own page (`seeds`:
    the between-seed spread, seeds.py)."""
    targets = order(list(summ.target))
    judged = cells.groupby("target")[["n", "gaps", "misses"]].sum()
    index = pd.DataFrame([{
        "target": t, "judged": int(judged.n.get(t, 0)), "gaps": int(judged.gaps.get(t, 0)),
        "misses": int(judged.misses.get(t, 0)),
        "page": f"[{page_name(t)}]({page_name(t)})"} for t in targets])
    return "\n\n".join([
        "# Governance matrix", INTRO,
        f"![heatmap](figures/{HEATMAP_FILE})",
        "## Targets\n\nEach target's grid (principal x path family, `gaps/n` per cell), its "
        "paths, endpoints it lacks, oracles, side effects, census, drift and gap catalogue "
        "are on its own page.\n\n" + _md(index, "no runs"),
        "## Summary per target\n\n" + _md(summ, "no runs"),
        "## Cross-tenant tally\n\n" + _md(cross, "no cross-tenant probes"),
        "## The paper's two rates at scale (paper 7.1 design; N = 2 F^2 K)\n\n" + _md(
            papers, "no paper-scale probes in these runs (set paper_fleets: 10)"),
        *([seeds.strip()] if seeds else []),
        "## Every row\n\nThe long lists, every target's rows: `tables/matrix_gaps.csv` (the "
        f"gap catalogue per principal, {catalogue_rows:,} rows, with counts and "
        "visibilities), `tables/matrix_not_applicable.csv`, `tables/matrix_na_reasons.csv`, "
        "`tables/matrix_oracles.csv`, `tables/matrix_side_effects.csv`, "
        "`tables/matrix_entity_census.csv`, `tables/matrix_agent_drift.csv` (a CSV over "
        f"{PAGE_LIMIT // 1000} KB lists its parts, one per target).",
    ]) + "\n"


def target_page(target: str, summary_row: pd.Series, cells: pd.DataFrame,
                lists: dict[str, pd.DataFrame], catalogue: pd.DataFrame) -> str:
    """reports/matrix/<target>.md: one target's matrix in full."""
    mine = {name: frame[frame.target == target].drop(columns="target")
            for name, frame in lists.items()}
    facts = pd.DataFrame({"": summary_row.index,
                          "value": ["" if pd.isna(v) else str(v) for v in summary_row]})
    parts = [
        f"# Governance matrix: {target}",
        f"[All targets](../MATRIX.md). {INTRO}",
        "## This target's run\n\n" + markdown(facts),
        "## Grid: principal x path family\n\nEach cell: gaps / judged probes (`+k m`: "
        "misses; `-`: nothing judged).\n\n" + _md(target_grid(cells), "no probes judged"),
        "## Paths\n\n" + _md(path_counts(cells), "no probes judged"),
    ]
    for title, name, text, empty in LISTS:
        parts.append(f"## {title}\n\n" + (f"{text}\n\n" if text else "")
                     + _whole_or_first(mine[name], name, empty))
    grouped = catalogue[catalogue.target == target].drop(columns="target")
    parts.append(
        "## Gap catalogue\n\nOne line per path and finding; the principals it holds for; a "
        "reproduction with the first of them (plan names: the run's nonce prefixes every "
        "fleet and agent id on the wire). Per principal, with counts and visibilities: "
        "`tables/matrix_gaps.csv`.\n\n"
        + _whole_or_first(grouped, "matrix_gaps", "no gaps and no misses"))
    return "\n\n".join(parts).replace("`tables/", "`../tables/") + "\n"
