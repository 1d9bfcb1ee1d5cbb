"""Target labels: two live engines stay apart and each is judged against the paper; an
embedder ablation is its own label and the report says what it changed."""

from __future__ import annotations

import json
from pathlib import Path

from fleetprobe.analysis.base import claims as verdict
from fleetprobe.analysis.base import labels as target_labels
from fleetprobe.analysis.base.results import Results
from fleetprobe.analysis.sections import embedder as embedder_report
from fleetprobe.analysis.sections import live_targets

from .fixtures.builders import contradiction, write_run


def relabel(run_dir: Path, **target: object) -> None:
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["target"].update(target)
    path.write_text(json.dumps(manifest))


def two_live_engines(root: Path) -> dict[str, str]:
    may = write_run(root, "20260601T000000Z-contradiction-seed7", "contradiction",
                    contradiction(rejected={"exact_duplicate": 102}, detected_both=0),
                    kind="live", profile=None)  # type: ignore[arg-type]
    aug = write_run(root, "20260601T010000Z-contradiction-seed7", "contradiction",
                    contradiction(), kind="live", profile=None,  # type: ignore[arg-type]
                    started_minute=5)
    relabel(may, server_profile=None, server_version="2.0.0", base_url="http://127.0.0.1:8001")
    relabel(aug, server_profile=None, server_version="2.29.0",
            base_url="http://127.0.0.1:8002")
    bundled = write_run(root, "20260530T120000Z-contradiction-seed7", "contradiction",
                        contradiction(), started_minute=9)
    return {"may": may.name, "aug": aug.name, "bundled": bundled.name}


def test_two_live_engines_are_two_labels_each_judged(tmp_path: Path) -> None:
    ids = two_live_engines(tmp_path)
    results = Results.load(tmp_path)
    try:
        labels = target_labels.judged_labels(results)
        assert labels == ["live 2.0.0 @ 127.0.0.1:8001", "live 2.29.0 @ 127.0.0.1:8002"]
        judged = verdict.judge_all(results)
        detection = {v.profile: v for v in judged if v.claim_id == "contradiction_detection_all"}
        assert set(detection) == {"memclaw-2026-05-30", *labels}
        assert detection[labels[0]].run_ids == [ids["may"]]
        assert detection[labels[0]].measured.startswith("0/")
        assert detection[labels[1]].run_ids == [ids["aug"]]
        assert "unknown" not in set(results.runs.profile)
        latency = {v.profile: v for v in judged if v.claim_id == "contradiction_write_latency"}
        assert latency["memclaw-2026-05-30"].status == verdict.NOT_COMPARABLE
        page = "\n".join(live_targets.section(results, judged))
        assert "## Target labels judged against the paper" in page
        assert "live 2.0.0 @ 127.0.0.1:8001" in page and "Latency rule" in page
    finally:
        results.con.close()


def test_selecting_only_live_runs_prints_no_bundled_verdicts(tmp_path: Path) -> None:
    ids = two_live_engines(tmp_path)
    results = Results.load(tmp_path, [ids["may"]])
    try:
        judged = verdict.judge_all(results)
        assert judged and all(v.profile.startswith("live ") for v in judged)
    finally:
        results.con.close()


def test_an_embedder_run_is_its_own_label_and_the_ablation_says_what_changed(
        tmp_path: Path) -> None:
    write_run(tmp_path, "20260530T120000Z-contradiction-seed7", "contradiction",
              contradiction(rejected={"near_duplicate": 40}))
    semantic = write_run(tmp_path, "20260530T130000Z-contradiction-seed7", "contradiction",
                         contradiction(rejected={"near_duplicate": 10}), started_minute=3)
    relabel(semantic, embedder="all-MiniLM-L6-v2")
    results = Results.load(tmp_path)
    try:
        assert embedder_report.pairs(results) == [
            ("memclaw-2026-05-30", "memclaw-2026-05-30 +all-MiniLM-L6-v2")]
        lines = "\n".join(embedder_report.section(results))
        assert "near-duplicate rejections (writes) (memclaw-2026-05-30) 40 -> 10" in lines
        # the hashing run stays canonical for the paper's claims
        run = results.canonical_run("contradiction", "memclaw-2026-05-30")
        assert run is not None and run.run_id == "20260530T120000Z-contradiction-seed7"
    finally:
        results.con.close()


def test_no_embedder_runs_yet_says_how_to_make_them(tmp_path: Path) -> None:
    write_run(tmp_path, "20260530T120000Z-contradiction-seed7", "contradiction",
              contradiction())
    results = Results.load(tmp_path)
    try:
        assert "make embed-ablation" in "\n".join(embedder_report.section(results))
    finally:
        results.con.close()
