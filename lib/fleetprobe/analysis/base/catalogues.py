"""The report's prose catalogues: data files beside paper_values.yaml (`<name>_catalogue.yaml`)
that sections read their sentences from, so a mechanism or a known issue is edited as text."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

ANALYSIS = Path(__file__).resolve().parent.parent


@cache
def catalogue(name: str) -> dict[str, Any]:
    return yaml.safe_load((ANALYSIS / f"{name}_catalogue.yaml").read_text(encoding="utf-8"))
