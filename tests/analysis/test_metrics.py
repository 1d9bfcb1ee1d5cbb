"""metrics.sql against hand-built traces whose answers are known by construction."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fleetprobe.analysis import write_summary
from fleetprobe.analysis.base import db
from fleetprobe.analysis.base.stats import wilson

from .fixtures import builders


def k_of_n(results, metric, role_run, variant=None):
    measured = results.measured_rate(metric, role_run, variant)
    return None if measured is None else (measured.k, measured.n)


def test_leakage_rates_per_variant(results, fixture_traces):
    run = fixture_traces[1]["leakage_0530"]
    documented, no_fleet = ("fleet_id", "fleet_ids"), ("no_fleet", "fleet_ids")
    for variant in (documented, no_fleet):
        assert k_of_n(results, "leakage_get_exposure", run, variant) == (164, 164)
        assert k_of_n(results, "leakage_get_miss", run, variant) == (0, 28)
        assert k_of_n(results, "leakage_search_miss", run, variant) == (4, 28)
        assert k_of_n(results, "leakage_probes_executed", run, variant) == (192, 192)
    assert k_of_n(results, "leakage_search_leak", run, documented) == (0, 164)
    assert k_of_n(results, "leakage_search_leak", run, no_fleet) == (72, 164)


def test_table3_and_reprobe(results, fixture_traces):
    ids = fixture_traces[1]
    table3 = results.view("leakage_table3", [ids["leakage_0531"]])
    trust1_cross = table3[(table3.trust == 1) & (table3.relation == "cross_fleet")].iloc[0]
    assert (trust1_cross.returned, trust1_cross.probes, trust1_cross.statuses) == (0, 1, "404")
    assert len(table3) == 4
    run = ids["leakage_0531"]
    assert k_of_n(results, "leakage_reprobe_trust1_cross_fleet", run) == (0, 36)
    assert k_of_n(results, "leakage_reprobe_trust2_cross_fleet", run) == (36, 36)
    assert k_of_n(results, "leakage_reprobe_same_fleet", run) == (12, 12)
    assert k_of_n(results, "leakage_reprobe_leaks", run) == (0, 96)
    assert k_of_n(results, "leakage_reprobe_leaks", ids["leakage_0530"]) == (36, 96)


def test_provenance(results, fixture_traces):
    ids = fixture_traces[1]
    run = ids["provenance_0530"]
    for metric in ("provenance_completeness", "provenance_writer_accuracy",
                   "provenance_depth_fidelity"):
        assert k_of_n(results, metric, run) == (50, 50)
    assert k_of_n(results, "provenance_writes_succeeded", run) == (200, 200)
    old = ids["provenance_small_old"]
    assert k_of_n(results, "provenance_completeness", old) == (0, 5)
    assert k_of_n(results, "provenance_writes_succeeded", old) == (15, 20)


def test_latency_percentiles_agree_with_numpy(results, fixture_traces):
    run = fixture_traces[1]["provenance_0530"]
    walk = [e["latency_ms"] for e in builders.provenance(50, 0) if e["phase"] == "walk"]
    measured = results.measured_latency("provenance_hop_latency", run)
    assert measured["n"] == len(walk) == 200
    for pct in (50, 95, 99):
        assert measured[f"p{pct}"] == pytest.approx(np.percentile(walk, pct))


def test_propagation(results, fixture_traces):
    run = fixture_traces[1]["propagation_0530"]
    assert k_of_n(results, "propagation_writes_succeeded", run) == (40, 40)
    assert k_of_n(results, "propagation_probes_produced", run) == (200, 200)
    assert k_of_n(results, "propagation_sibling_visibility", run) == (117, 120)
    assert k_of_n(results, "propagation_cross_fleet_leak", run) == (0, 80)
    window = [700, 800, 820, 830, 840, 900, 1500, 1900]
    measured = results.measured_latency("propagation_window_latency", run)
    assert measured["p50"] == pytest.approx(np.percentile(window, 50))
    assert measured["max"] == 1900
    by_relation = results.view("propagation_visibility_by_relation", [run])
    assert dict(zip(by_relation.reader_relation, by_relation.visible, strict=True)) == {
        "sibling": 117, "foreign": 0}


def test_contradiction(results, fixture_traces):
    run = fixture_traces[1]["contradiction_0530"]
    assert k_of_n(results, "contradiction_writes_succeeded", run) == (290, 400)
    assert k_of_n(results, "contradiction_writes_rejected", run) == (110, 400)
    assert k_of_n(results, "contradiction_both_admitted", run) == (90, 200)
    assert k_of_n(results, "contradiction_detection_all", run) == (60, 200)
    assert k_of_n(results, "contradiction_detection_both_admitted", run) == (60, 90)
    assert k_of_n(results, "contradiction_stale_read", run) == (0, 200)
    admission = results.view("contradiction_admission", [run])
    totals = admission.groupby("outcome").writes.sum().to_dict()
    assert totals == {"admitted": 290, "exact_duplicate": 70, "near_duplicate": 40}


def test_write_latency_split_by_triggered_contradiction(results, fixture_traces):
    run = fixture_traces[1]["contradiction_0530"]
    events = builders.contradiction(rejected={"exact_duplicate": 70, "near_duplicate": 40},
                                    detected_both=60)
    triggering = {e["memory_id"] for e in events
                  if e["phase"] == "refetch" and e["observed_supersedes_id"]}
    admitted = [e for e in events if e["phase"] == "write" and e["admitted"]]
    triggered = [e["latency_ms"] for e in admitted if e["memory_id"] in triggering]
    overall = results.measured_latency("contradiction_write_latency", run)
    split = results.measured_latency("contradiction_write_latency_triggered", run)
    assert overall["n"] == len(admitted) == 290
    assert split["n"] == len(triggered) == 60
    assert split["p95"] == pytest.approx(np.percentile(triggered, 95))


def test_interrupted_run_keeps_what_it_measured(results, fixture_traces):
    run = fixture_traces[1]["provenance_proposed_cut"]
    # 40 chains were written; the cut-off last line was chain 39's judgement.
    assert k_of_n(results, "provenance_completeness", run) == (39, 39)
    assert k_of_n(results, "provenance_writes_succeeded", run) == (160, 160)
    row = results.runs.set_index("run_id").loc[run]
    assert not row.complete


def test_empty_traces_root_gives_empty_views(tmp_path):
    con = db.connect(tmp_path)
    assert con.execute("SELECT count(*) FROM rate_metrics").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM latency_metrics").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_summary_of_an_empty_run_is_a_header(fixture_traces):
    root, ids = fixture_traces
    path = write_summary(root / ids["naive_empty"])
    assert path.read_text().splitlines() == ["metric,numerator,denominator,value,ci_low,ci_high"]


def test_summary_rows_carry_wilson_intervals_and_percentiles(tmp_path):
    run_dir = builders.write_run(tmp_path, "20260530T000000Z-propagation-seed1",
                                 "propagation", builders.propagation())
    rows = {r["metric"]: r for r in csv.DictReader(write_summary(run_dir).open())}
    sibling = rows["propagation_sibling_visibility"]
    low, high = wilson(117, 120)
    assert (sibling["numerator"], sibling["denominator"]) == ("117", "120")
    assert float(sibling["ci_low"]) == pytest.approx(low, abs=1e-6)
    assert float(sibling["ci_high"]) == pytest.approx(high, abs=1e-6)
    assert float(rows["propagation_window_latency_max_ms"]["value"]) == 1900
    assert rows["propagation_window_latency_p50_ms"]["denominator"] == "8"


def test_summary_of_a_run_without_manifest_or_run_id(tmp_path):
    run_dir = builders.write_run(tmp_path, "20260530T000000Z-provenance-seed1", "provenance",
                                 builders.provenance(3, 1), manifest=False)
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    stripped = [json.dumps({k: v for k, v in json.loads(line).items() if k != "run_id"})
                for line in lines]
    (run_dir / "events.jsonl").write_text("\n".join(stripped) + "\n")
    rows = {r["metric"]: r for r in csv.DictReader(write_summary(run_dir).open())}
    assert (rows["provenance_completeness"]["numerator"],
            rows["provenance_completeness"]["denominator"]) == ("2", "3")
    con = db.connect(tmp_path)
    assert con.execute("SELECT run_id, has_manifest FROM runs").fetchall() == [
        (run_dir.name, False)]


def test_summary_of_an_interrupted_run_matches_the_report_views(results, fixture_traces):
    root, ids = fixture_traces
    run = ids["provenance_proposed_cut"]
    rows = {r["metric"]: r for r in csv.DictReader(write_summary(root / run).open())}
    assert (rows["provenance_completeness"]["numerator"],
            rows["provenance_completeness"]["denominator"]) == ("39", "39")
    hop = results.measured_latency("provenance_hop_latency", run)
    assert float(rows["provenance_hop_latency_p95_ms"]["value"]) == pytest.approx(hop["p95"])


def test_a_run_directory_can_be_the_root(fixture_traces):
    root, ids = fixture_traces
    con = db.connect(root / ids["propagation_0530"])
    assert con.execute("SELECT DISTINCT run_id FROM events").fetchall() == [
        (ids["propagation_0530"],)]


# Columns the experiment notebooks select from the views (notebooks/*.ipynb): a contract.
VIEW_COLUMNS_USED_ELSEWHERE = {
    "leakage_table3": {"credential", "trust", "relation", "expected", "probes", "returned",
                       "leaks", "statuses"},
    "leakage_reprobe": {"trust", "relation", "expected", "returned", "probes", "leaks",
                        "misses", "statuses"},
    "contradiction_admission": {"run_id"},
    "contradiction_write_latency_by_trigger": {"run_id", "triggered", "p50", "p95", "p99"},
    "propagation_visibility_by_relation": {"run_id", "reader_relation", "visible", "probes"},
    "propagation_window_latency": {"run_id", "p50", "p95", "max"},
    "propagation_redistribute": {"run_id", "requester_trust", "relation", "flipped"},
}


@pytest.mark.parametrize(("view", "columns"), sorted(VIEW_COLUMNS_USED_ELSEWHERE.items()))
def test_views_keep_the_columns_other_notebooks_select(tmp_path, view, columns):
    con = db.connect(tmp_path)
    present = {row[0] for row in con.execute(f'DESCRIBE "{view}"').fetchall()}
    assert columns <= present


def rows_of_variant(results, group, variant):
    """A metric's rows for one run, filtered directly: those of `variant` (default: the
    headline one) where the metric has variants, else all of them."""
    if group.variant_write.notna().any():
        write, search = variant or results.headline_variant
        return group[(group.variant_write == write) & (group.variant_search == search)]
    return group


def test_measured_rate_sums_the_rate_rows_of_its_variant(results):
    """Every (metric, run, variant) the rate table holds, and some it does not, against
    the rate table's rows filtered and summed directly."""
    rates = results.rates
    variants = [None, ("fleet_id", "fleet_ids"), ("no_fleet", "fleet_ids"), ("nope", "nope")]
    for (metric, run_id), group in rates.groupby(["metric", "run_id"]):
        for variant in variants:
            rows = rows_of_variant(results, group, variant)
            expected = None if rows.empty else (int(rows.numerator.sum()),
                                                int(rows.denominator.sum()))
            assert k_of_n(results, metric, run_id, variant) == expected, (metric, run_id)
    assert results.measured_rate("leakage_search_leak", "no-such-run") is None
    assert results.measured_rate("no_such_metric", rates.run_id.iloc[0]) is None


def test_measured_latency_is_the_first_latency_row_of_its_variant(results):
    """Every (metric, run, variant) of the latency table, and some it does not hold, against
    its rows filtered directly."""
    latencies = results.latencies
    variants = [None, ("fleet_id", "fleet_ids"), ("no_fleet", "fleet_ids"), ("nope", "nope")]
    for (metric, run_id), group in latencies.groupby(["metric", "run_id"]):
        for variant in variants:
            rows = rows_of_variant(results, group, variant)
            expected = None if rows.empty else {
                k: float(rows.iloc[0][k]) for k in ("n", "p50", "p95", "p99", "max")
                if rows.iloc[0][k] is not None and not np.isnan(rows.iloc[0][k])}
            assert results.measured_latency(metric, run_id, variant) == expected, (metric,
                                                                                   run_id)
    assert len(latencies.groupby(["metric", "run_id"])) > 3
    assert results.measured_latency("no_such_metric", latencies.run_id.iloc[0]) is None
