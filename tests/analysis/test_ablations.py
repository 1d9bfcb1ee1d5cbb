"""Headline versus ablation runs: the canonical picker, the ablation tables and the two
REPRODUCTION.md sections, on hand-built traces whose answers are known by construction."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from fleetprobe.analysis import report
from fleetprobe.analysis.base import claims as verdict
from fleetprobe.analysis.base.ablation_rows import RunRow
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.base.stats import fmt_rate, rate
from fleetprobe.analysis.sections import contradiction, provenance
from fleetprobe.analysis.sections import verdict as verdict_section

from .fixtures import builders


@pytest.fixture(scope="module")
def ablation_traces(tmp_path_factory):
    root = tmp_path_factory.mktemp("ablation_traces")
    return root, builders.build_ablation_traces(root)


@pytest.fixture(scope="module")
def ablation_results(ablation_traces):
    return Results.load(ablation_traces[0])


@pytest.fixture(scope="module")
def built(ablation_traces, tmp_path_factory):
    return report.build(ablation_traces[0], tmp_path_factory.mktemp("ablation_reports"))


def by_run(rows: list[RunRow]) -> dict[str, RunRow]:
    return {r.run_id: r for r in rows}


# ------------------------------------------------------------------------------ canonical runs


def test_a_later_ablation_run_does_not_become_canonical(ablation_results, ablation_traces):
    ids = ablation_traces[1]
    provenance = ablation_results.canonical_run("provenance", "memclaw-2026-05-30")
    assert (provenance.run_id, provenance.basis) == (ids["provenance_paced"], "paper scale")
    contradiction = ablation_results.canonical_run("contradiction", "memclaw-2026-05-30")
    assert contradiction.run_id == ids["contradiction_headline"]
    # a profile with ablation runs only has no run standing for the paper's configuration
    assert ablation_results.canonical_run("contradiction", "proposed") is None
    runs = ablation_results.runs.set_index("run_id")
    assert runs.loc[ids["provenance_unthrottled"], "differs"] == (
        "pace_writes_per_s: null (headline: not null)")
    assert runs.loc[ids["contradiction_value_only_0530"], "differs"] == (
        "pair_prose: value_only (headline: frames)")
    assert runs.loc[ids["contradiction_headline"], "role"] == "headline"


def test_table2_claims_rest_on_the_headline_runs(ablation_results, ablation_traces):
    ids = ablation_traces[1]
    judged = {v.claim_id: v for v in verdict.judge_all(ablation_results)}
    assert judged["provenance_completeness"].run_ids == [ids["provenance_paced"]]
    assert judged["provenance_completeness"].measured.startswith("50/50")
    assert judged["contradiction_detection_all"].run_ids == [ids["contradiction_headline"]]
    assert judged["contradiction_detection_all"].measured.startswith("90/200")


def test_an_explicitly_selected_ablation_run_still_wins(ablation_traces):
    root, ids = ablation_traces
    unthrottled = ids["provenance_unthrottled"]
    selected = Results.load(root, [unthrottled])
    run = selected.canonical_run("provenance", "memclaw-2026-05-30")
    assert (run.run_id, run.basis) == (unthrottled, "selected")
    roles = {r.run_id: r.role for r in provenance.pacing_rows(selected)}
    assert roles == {unthrottled: "ablation (selected)",
                     ids["provenance_paced"]: "headline config, not canonical"}


def test_ablation_runs_alone_are_not_measured_and_say_why(tmp_path):
    builders.write_run(tmp_path, "20260530T133000Z-provenance-seed7", "provenance",
                       builders.provenance_rate_limited(), planned={"write": 200},
                       params={"pace_writes_per_s": None})
    judged = {v.claim_id: v for v in verdict.judge_all(Results.load(tmp_path))}
    completeness = judged["provenance_completeness"]
    assert completeness.status == verdict.NOT_MEASURED
    assert "ablation runs only: 20260530T133000Z-provenance-seed7" in completeness.reason


def test_a_manifest_without_the_knob_is_not_taken_for_the_paper_configuration(tmp_path):
    run_dir = builders.write_run(tmp_path, "20260530T120500Z-provenance-seed7", "provenance",
                                 builders.provenance(5, 0), planned={"write": 200})
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"pace_writes_per_s": 8.0', ""))
    runs = Results.load(tmp_path).runs
    assert list(runs.differs) == ["pace_writes_per_s: unrecorded (headline: not null)"]


# ------------------------------------------------------------------------------ views and tables


def test_provenance_write_views_count_the_writes_a_lost_chain_never_sent(ablation_results,
                                                                         ablation_traces):
    run = ablation_traces[1]["provenance_unthrottled"]

    def k_of_n(metric):
        measured = ablation_results.measured_rate(metric, run)
        return measured.k, measured.n

    assert k_of_n("provenance_writes_admitted") == (176, 200)
    assert k_of_n("provenance_writes_succeeded") == (176, 188)
    assert k_of_n("provenance_rate_limited") == (12, 188)
    assert k_of_n("provenance_completeness") == (38, 50)


def test_pacing_table_numbers(built, ablation_traces):
    ids = ablation_traces[1]
    rows = {r["run_id"]: r for r in csv.DictReader(
        (built["out_dir"] / "tables" / "ablation_pacing.csv").open())}
    assert set(rows) == {ids["provenance_paced"], ids["provenance_unthrottled"]}
    paced, loose = rows[ids["provenance_paced"]], rows[ids["provenance_unthrottled"]]
    assert (paced["role"], paced["pacing"], paced["writes admitted/planned"],
            paced["429 rejections"]) == ("headline", "paced 8/s", "200/200", "0")
    assert paced["chains complete"] == "50/50 = 1.000 [0.929, 1.000]"
    assert (loose["role"], loose["pacing"], loose["writes admitted/planned"],
            loose["429 rejections"]) == ("ablation", "unthrottled", "176/200", "12")
    assert loose["chains complete"] == fmt_rate(rate(38, 50))
    assert loose["chains complete"].startswith("38/50 = 0.760 [")


def test_contradiction_knob_table_numbers(built, ablation_traces):
    ids = ablation_traces[1]
    frame = built["tables"]["ablation_contradiction"].frame.set_index("run_id")
    assert list(frame.profile) == ["memclaw-2026-05-30"] * 3 + ["proposed"]
    headline = frame.loc[ids["contradiction_headline"]]
    assert (headline.role, headline.prose_diversity, headline.pair_prose,
            headline.writer_assignment) == ("headline", "low", "frames", "per_fact")
    assert (headline["writes admitted"], headline["rejected exact_duplicate"],
            headline["rejected near_duplicate"], headline["both admitted"]) == (
        "290/400", 110, 0, "90/200")
    assert headline["detection (all)"] == fmt_rate(rate(90, 200))
    assert headline["detection (both admitted)"].startswith("90/90 = 1.000")
    gated = frame.loc[ids["contradiction_value_only_0530"]]
    assert (gated.role, gated.pair_prose, gated["writes admitted"],
            gated["rejected near_duplicate"], gated["both admitted"]) == (
        "ablation", "value_only", "220/400", 180, "20/200")
    assert gated["detection (all)"].startswith("20/200 = 0.100")
    assert gated["detection (both admitted)"].startswith("20/20 = 1.000")
    proposed = frame.loc[ids["contradiction_value_only_proposed"]]
    assert (proposed["writes admitted"], proposed["rejected near_duplicate"],
            proposed["both admitted"]) == ("400/400", 0, "200/200")
    assert proposed["detection (all)"].startswith("190/200 = 0.950")
    assert frame.loc[ids["contradiction_high_0530"], "prose_diversity"] == "high"


# ------------------------------------------------------------------------------ REPRODUCTION.md


def test_pacing_section_compares_paced_and_unthrottled(built, ablation_traces):
    ids = ablation_traces[1]
    text = built["reproduction"].read_text()
    section = text[text.index("## Pacing"):text.index("## Pipeline ordering")]
    finding = next(line for line in section.splitlines() if line.startswith("- "))
    assert ids["provenance_unthrottled"] in finding and ids["provenance_paced"] in finding
    assert "38/50 = 0.760" in finding and "12 writes rejected 429" in finding
    assert "50/50 = 1.000" in finding and "0 rejected 429" in finding
    assert "unthrottled writes lose chains to the rate limit" in finding


def test_pipeline_ordering_section_answers_the_9_2_question(built):
    text = built["reproduction"].read_text()
    section = text[text.index("## Pipeline ordering"):text.index("## Runs")]
    finding = next(line for line in section.splitlines() if line.startswith("- "))
    assert finding.startswith("- `prose_diversity: low`, `writer_assignment: per_fact`")
    assert "`memclaw-2026-05-30` 180 near-duplicate rejections of 400 writes" in finding
    assert "detection 20/200 = 0.100" in finding
    assert "`proposed` 0 near-duplicate rejections of 400 writes" in finding
    assert "detection 190/200 = 0.950" in finding
    assert "yes, checking the triple before the near-duplicate gate" in finding
    # the headline (frames) and prose_diversity high runs are not value_only rows
    assert "| frames" not in section and "| high" not in section


def test_runs_table_names_headline_and_ablation_runs(built, ablation_traces):
    ids = ablation_traces[1]
    text = built["reproduction"].read_text()
    runs = text[text.index("## Runs"):]
    line = next(row for row in runs.splitlines() if ids["provenance_unthrottled"] in row)
    assert "| ablation " in line and "pace_writes_per_s: null (headline: not null)" in line
    line = next(row for row in runs.splitlines() if ids["provenance_paced"] in row)
    assert "| headline " in line and "paper scale" in line
    line = next(row for row in runs.splitlines()
                if ids["contradiction_value_only_proposed"] in row)
    assert "pair_prose: value_only (headline: frames)" in line


def test_sections_say_in_one_line_when_the_ablation_runs_are_absent(results):
    pacing = provenance.pacing_section(provenance.pacing_rows(results))
    ordering = contradiction.pipeline_ordering_section(contradiction.contradiction_rows(results))
    assert [line for line in pacing[1:] if line] == [
        "_No unthrottled provenance run (`pace_writes_per_s: null`) in the traces; nothing to "
        "compare the paced runs with._"]
    assert [line for line in ordering[1:] if line] == [
        "_No contradiction run with `pair_prose: value_only` in the traces; the 9.2 ordering "
        "is not tested._"]


def test_a_value_only_run_without_its_counterpart_says_so(tmp_path):
    builders.write_run(tmp_path, "20260530T134000Z-contradiction-seed7", "contradiction",
                       builders.contradiction(rejected={"near_duplicate": 180}),
                       planned={"write": 400}, params=builders.VALUE_ONLY)
    rows = contradiction.contradiction_rows(Results.load(tmp_path))
    finding = contradiction.pipeline_ordering_section(rows)[-2]
    assert finding.endswith("no `proposed` run to compare with.")


@pytest.mark.parametrize("experiment", ["provenance", "propagation", "contradiction"])
def test_the_reference_and_live_params_are_headline_runs(experiment, results):
    """`make reproduce` (params/reference) and the live params must produce runs that can stand
    for Table 2."""
    root = Path(__file__).resolve().parents[2] / "params"
    for target in ("reference", "live"):
        params = yaml.safe_load((root / target / f"{experiment}.yaml").read_text())
        assert results.headline_differences(experiment, json.dumps(params)) == [], target


def test_runs_section_counts_the_runs_it_leaves_out(results, fixture_traces):
    lines = verdict_section.runs_section(results)
    assert fixture_traces[1]["provenance_small_old"] not in "\n".join(lines)
    # the count follows the runs table (the library versions section comes after it)
    assert sum("1 other run(s) under the traces root" in line for line in lines) == 1
