"""The report's sections, one module each, in the order the report shows them.

A section module has one entry point, `build(context: base.section.Context) ->
base.section.SectionOutput`, and imports only `fleetprobe.analysis.base` (never another
section: `.importlinter` checks it). Adding a section = one new module here + one line below.
"""

from __future__ import annotations

# key -> module (under fleetprobe.analysis.sections); the order is the page's and notebook's
REGISTRY: dict[str, str] = {}


def register(key: str, module: str) -> None:
    """Add a section (or move an existing key to a new module, keeping its place)."""
    REGISTRY[key] = module


register("verdict", "verdict")
register("leakage", "leakage")
register("provenance", "provenance")
register("propagation", "propagation")
register("contradiction", "contradiction")
register("matrix", "matrix")
register("separation", "separation")
register("faults", "faults")
register("dynamics", "dynamics")
register("backends", "backends")
register("scale", "scale")
register("embedder", "embedder")
register("live_targets", "live_targets")
register("fidelity", "fidelity")
