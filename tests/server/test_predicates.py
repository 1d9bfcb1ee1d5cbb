"""The server's single-valued predicates are exactly MemClaw's list (kept as data)."""

from __future__ import annotations

from pathlib import Path

import reference_server
from reference_server.pipeline import contradiction

DATA = Path(reference_server.__file__).parent / contradiction.PREDICATES_FILE


def names_in_file() -> list[str]:
    return [line.strip() for line in DATA.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_the_list_is_the_engines_274_names_sorted_and_unique() -> None:
    names = names_in_file()
    assert len(names) == 274
    assert names == sorted(set(names))
    assert contradiction.SINGLE_VALUE_PREDICATES == frozenset(names)


def test_the_data_file_names_its_source() -> None:
    header = " ".join(DATA.read_text().splitlines()[:6])
    assert "caura-ai/caura" in header and "common/constants.py" in header


def test_names_the_engine_lacks_are_multi_valued() -> None:
    # `owner` and `runs_in` are not MemClaw names; `owned_by`, `region`, `status` are
    for name in ("owner", "owners", "runs_in", "hosted_in", "team"):
        assert not contradiction.is_single_valued(name), name
    for name in ("owned_by", "region", "status", "STATUS", "reports_to", "runs_on"):
        assert contradiction.is_single_valued(name), name


def test_the_faults_workload_uses_single_valued_predicates_only() -> None:
    # its one-active-head checker judges supersession, which only single-valued ones get
    from fleetprobe.experiments.faults import PREDICATES

    assert all(contradiction.is_single_valued(p) for p in PREDICATES)
