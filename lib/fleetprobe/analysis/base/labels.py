"""Target labels beside the bundled profiles: which labels are judged against the paper.

Every run carries a target label (manifest `target.label`; the `profile` column of the
analysis). The paper's claims name the bundled profile that reproduces the state the paper
measured; any other label that is an engine rather than a design comparand (a live endpoint,
the bundled `memclaw-2.29`, a relabelled reference run) is judged against every claim its
runs measure, each label in rows of its own, never merged with another.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

# Bundled profiles that are design alternatives, not engines: they have no paper claim to meet.
COMPARANDS = frozenset({"proposed", "naive", "hardened"})
LIVE_LATENCY_FACTOR = 2.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def claim_profiles(results: Any) -> set[str]:
    return {claim["profile"] for claim in results.claims}


def judged_labels(results: Any) -> list[str]:
    """Canonical labels no claim names and that are not design comparands."""
    named = claim_profiles(results) | COMPARANDS
    labels = results.canonical.profile.dropna().unique() if not results.canonical.empty else []
    # `<comparand> +<embedder>` (an embedder ablation of a comparand) is a comparand too
    return sorted(str(label) for label in labels
                  if label not in named and str(label).split(" +", 1)[0] not in COMPARANDS)


def only_live_selected(results: Any) -> bool:
    """True when runs were selected and every one belongs to a judged label (so the bundled
    profiles' committed verdicts are not printed as if they were the selection's)."""
    if not results.selected:
        return False
    runs = results.runs[results.runs.run_id.isin(list(results.selected))]
    return not runs.empty and set(runs.profile) <= set(judged_labels(results))


def label_claims(results: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, claim) for every judged label and every claim whose experiment it ran."""
    canonical = results.canonical
    for label in judged_labels(results):
        experiments = set(canonical[canonical.profile == label].experiment)
        for claim in results.claims:  # a claim the kit cannot measure is judged once
            if claim["metric"] and claim["metric"].split("_", 1)[0] in experiments:
                yield label, claim


def is_loopback(base_url: str | None) -> bool:
    return (urlsplit(base_url or "").hostname or "") in LOOPBACK_HOSTS


def latency_comparable(target_kind: str | None, base_url: str | None) -> bool:
    """A run's latency compares with the paper's (memclaw.net, a production service) only when
    it measured a live service over a network: the bundled server, an engine or anything on
    loopback shares a loaded machine with the harness."""
    return target_kind == "live" and not is_loopback(base_url)


# the matrix's paths in families a reader compares across targets (policy.PATHS); a path in
# none of them (contradictions, entity, agent records, ...) is `other`
PATH_FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("read by id", ("get",)),
    ("search / recall", ("search", "recall")),
    ("list", ("list",)),
    ("change by id", ("patch", "delete", "after_redistribute")),
    ("write", ("write", "bulk_write", "entity_upsert")),
    ("reveal", ("dup_", "idempotency", "bulk_attempt")),
)
OTHER_FAMILY = "other"


def path_family(path: str) -> str:
    """The family of a matrix path (`other` for contradictions, entity, agent records, ...)."""
    for name, prefixes in PATH_FAMILIES:
        if path.startswith(prefixes):
            return name
    return OTHER_FAMILY


def describe_world(params: str | None, moved_agents: bool = False) -> str:
    """A matrix world (its params as JSON) in a few words: tenants, fleets, random probes,
    the paper's layout and, when asked, agents moved to another fleet after writing (worlds
    recorded before `moved_agents` have none)."""
    doc = json.loads(params or "{}")
    text = (f"{doc.get('tenants', '?')} tenants x {doc.get('fleets', '?')} fleets, "
            f"{doc.get('random_probes', '?')} random probes")
    if doc.get("paper_fleets"):
        text += (f", paper layout {doc['paper_fleets']} x "
                 f"{doc.get('paper_agents_per_fleet', '?')}")
    return text + (", moved agents" if moved_agents and doc.get("moved_agents") else "")
