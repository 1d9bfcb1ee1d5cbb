"""`promote`: a complete reproduction becomes the committed canonical runs of its plan in
`data/traces/` (events gzipped with fixed bytes), recorded in `data/traces/canonical.json`.
Nothing is promoted from an incomplete reproduction or sweep: every run the plan named must
be in the record as complete, with its directory under `runs/`."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
from pathlib import Path
from typing import Any

from fleetprobe.harness.experiment import ParamsError
from fleetprobe.reproduction.record import CANONICAL, INDEX, RECORD, read_record, write_json


def gzip_bytes(data: bytes) -> bytes:
    """gzip with no file name and mtime 0: the same input gives the same bytes."""
    with contextlib.closing(io.BytesIO()) as buffer:
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0,
                           compresslevel=9) as zipped:
            zipped.write(data)
        return buffer.getvalue()


def incomplete_runs(directory: Path, record: dict[str, Any]) -> list[str]:
    """The plan's runs (`planned`, every run a sweep expands to) that are not complete here:
    not ok in the record, or their directory missing from `runs/`."""
    runs = record.get("runs") or {}
    missing = []
    for key in record.get("planned") or sorted(runs):
        state = runs.get(key) or {}
        run_id = state.get("run_id")
        if state.get("status") != "ok" or not run_id or not (directory / "runs" / run_id
                                                               ).is_dir():
            missing.append(key)
    return missing


def promote(directory: str | Path, canonical: Path = CANONICAL, allow_fast: bool = False) -> int:
    directory = Path(directory)
    record = read_record(directory)
    if record is None:
        raise ParamsError(f"{directory} is not a reproduction (no {RECORD})")
    if not record.get("complete"):
        raise ParamsError(f"{directory} is not complete; run `make reproduce` again to finish it")
    missing = incomplete_runs(directory, record)
    if missing:
        raise ParamsError(f"{directory} lacks {len(missing)} complete run(s) of its plan "
                          f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}); "
                          "nothing is promoted from an incomplete sweep")
    if record.get("fast") and not allow_fast:
        raise ParamsError(f"{directory} ran with the rate limits lifted (--fast); the "
                          "canonical evidence is made at the paper's limits (--allow-fast "
                          "to promote it anyway)")
    plan = str(record["plan"])
    new_runs = sorted(s["run_id"] for s in record["runs"].values() if s.get("status") == "ok")
    canonical.mkdir(parents=True, exist_ok=True)
    index_path = canonical / INDEX
    index = json.loads(index_path.read_text()) if index_path.is_file() else {"plans": {}}
    plans: dict[str, Any] = index.setdefault("plans", {})
    if plan in plans:
        old = set(plans[plan]["runs"])
    else:  # runs committed before the index existed belong to no other plan
        claimed = {r for p in plans.values() for r in p["runs"]}
        old = {d.name for d in canonical.iterdir() if d.is_dir() and d.name not in claimed}
    clash = sorted(n for n in new_runs if (canonical / n).exists() and n not in old)
    if clash:
        raise ParamsError(f"{', '.join(clash)} already in {canonical} for another plan")
    for name in sorted(old):
        shutil.rmtree(canonical / name, ignore_errors=True)
    for name in new_runs:
        source, target = directory / "runs" / name, canonical / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        for item in sorted(source.iterdir()):
            if item.name == "events.jsonl":
                (target / "events.jsonl.gz").write_bytes(gzip_bytes(item.read_bytes()))
            else:
                shutil.copyfile(item, target / item.name)
    notebooks = {s["experiment"]: s["run_id"] for s in record["runs"].values()
                 if s.get("notebook") and s.get("status") == "ok"}
    plans[plan] = {"reproduction": directory.name, "plan_file": record.get("plan_file"),
                   "fast": bool(record.get("fast")), "git_commit": record.get("git_commit"),
                   "runs": new_runs, "notebooks": dict(sorted(notebooks.items()))}
    write_json(index_path, index)
    print(f"promoted {len(new_runs)} run(s) of plan {plan!r} into {canonical} "
          f"(replaced {len(old)}); now `make notebooks report` rebuilds reports/ from them")
    return 0


