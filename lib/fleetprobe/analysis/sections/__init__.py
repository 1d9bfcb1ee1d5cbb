"""The report's sections, one module each, in the order the report shows them.

A section module has one entry point, `build(context: base.section.Context) ->
base.section.SectionOutput`, and imports only `fleetprobe.analysis.base` (never another
section: `.importlinter` checks it). Adding a section = one new module here + one line below.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPER = ("leakage", "contradiction", "provenance", "propagation")


@dataclass(frozen=True)
class Registered:
    """A section: its module (under fleetprobe.analysis.sections) and what its output is made
    of besides code: the experiments whose runs it reads (None: every run), and other files
    it reads, relative to the traces root's parent. The build makes a section again when any
    of these changed (`fleetprobe.analysis.build.inputs`); a test checks that `experiments`
    holds the module's own EXPERIMENTS."""

    module: str
    experiments: tuple[str, ...] | None
    files: tuple[str, ...] = ()


# key -> section; the order is the page's and notebook's
REGISTRY: dict[str, Registered] = {}


def register(key: str, module: str, experiments: tuple[str, ...] | None,
             files: tuple[str, ...] = ()) -> None:
    """Add a section (or move an existing key to a new module, keeping its place)."""
    REGISTRY[key] = Registered(module, experiments, files)


# every run: the verdict lists each experiment's canonical run
register("verdict", "verdict", None)
register("leakage", "leakage", ("leakage",))
register("provenance", "provenance", ("provenance",))
register("propagation", "propagation", ("propagation",))
register("contradiction", "contradiction", ("contradiction",))
register("matrix", "matrix", ("matrix",))
register("separation", "separation", ("separation",))
register("faults", "faults", ("faults",))
register("dynamics", "dynamics", ("dynamics",))
register("backends", "backends", (*PAPER, "matrix"))
# the scripted-model probes (issue 37, part 3): their own recorded files, no run
register("model_probes", "backends.model_probes", (),
         ("model-probes/20261205T053548Z/manifest.json",))
register("scale", "scale", ("leakage", "propagation"), ("scale/recall.json",))
register("embedder", "embedder", ("leakage", "contradiction"))
# every run: its target table lists each label's experiments from the manifests
register("live_targets", "live_targets", None)
register("fidelity", "fidelity", ("matrix", "separation", "dynamics", *PAPER))
