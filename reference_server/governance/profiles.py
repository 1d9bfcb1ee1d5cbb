"""Behaviour profiles: every policy choice the server makes, named in one frozen object.

Handlers never branch on a profile's name; they ask the profile. The write and search paths
are compositions (lists of step names, see `pipeline/write.py`), so the difference between
`memclaw-2026-05-30` and `proposed` reads as two lists side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# The write pipeline as measured: exact duplicate, then the strong-mode near-duplicate gate,
# then the row; contradiction detection is scheduled after commit.
MEASURED_WRITE_STEPS: tuple[str, ...] = (
    "check_content_length",
    "resolve_write_mode",
    "hash_content",
    "embed",
    "check_exact_duplicate",
    "check_near_duplicate",
    "insert_row_and_schedule_detection",
)

# Paper section 9.2 (a): a write carrying an RDF triple on a single-valued predicate goes
# to the structural detector instead of being refused by the near-duplicate gate.
PROPOSED_WRITE_STEPS: tuple[str, ...] = (
    "check_content_length",
    "resolve_write_mode",
    "hash_content",
    "embed",
    "check_exact_duplicate",
    "check_near_duplicate_unless_single_valued_triple",
    "insert_row_and_schedule_detection",
)

# MemClaw v2.29's write path: as measured, plus fast mode's advisory near-duplicate signal
# (the new row's metadata names the nearest row of its fleet and visibility; no 409).
ENGINE_2_29_WRITE_STEPS: tuple[str, ...] = (
    "check_content_length",
    "resolve_write_mode",
    "hash_content",
    "embed",
    "check_exact_duplicate",
    "check_near_duplicate",
    "detect_near_duplicate",
    "insert_row_and_schedule_detection",
)

# A flat store: no dedup, no supersession.
NAIVE_WRITE_STEPS: tuple[str, ...] = (
    "check_content_length",
    "resolve_write_mode",
    "hash_content",
    "embed",
    "insert_row",
)

SEARCH_STEPS: tuple[str, ...] = (
    "resolve_search_identity",
    "apply_agent_fleet_rules",
    "score_candidates",
    "filter_visible",
    "expand_entity_graph",
    "rank_and_trim",
    "append_successors",
)

NAIVE_SEARCH_STEPS: tuple[str, ...] = (
    "score_candidates",
    "filter_visible",
    "expand_entity_graph",
    "rank_and_trim",
)


@dataclass(frozen=True)
class LatencyModel:
    """Simulated service times (off by default): strong-mode enrichment runs through a
    bounded worker pool, so queueing under concurrency produces a heavy tail."""

    strong_enrichment_median_s: float = 1.5
    strong_enrichment_sigma: float = 0.6
    enrichment_workers: int = 4
    detection_delay_s: float = 5.0


@dataclass(frozen=True)
class Hardening:
    """Gaps the governance matrix finds in `proposed`, each closed by one switch. Every switch
    defaults to MemClaw's behaviour (as its wire contract documents it); `hardened` turns all
    of them on. The scope rules themselves stay in `scope.py`; these choose where they apply."""

    # search: an agent key governs by its own identity (filter_agent_id only filters), every
    # candidate row must pass the by-id predicate, and a search never registers or re-homes
    # an agent as a side effect
    search_identity_key_first: bool = False
    search_row_access: bool = False
    search_registers_agents: bool = True
    # list: the by-id predicate (trust ladder, fleets) of the credential's own identity on
    # every row (never of an `agent_id` filter's); include_deleted only for a caller without
    # agent identity
    list_row_access: bool = False
    list_deleted_tenant_only: bool = False
    # entities: GET applies the fleet read rule to the entity itself; upsert the write rules
    entity_scope: bool = False
    # GET /agents/{id} with an agent key: only agents the caller could read a team row of
    agent_read_scope: bool = False
    # PATCH status: the same rules as PATCH (trust, ownership), not only the row check
    status_patch_update_rules: bool = False
    # bulk attempt ids and Idempotency-Keys are scoped to the writing agent
    bulk_attempts_per_agent: bool = False
    idempotency_per_agent: bool = False
    # the near-duplicate gate compares only against rows the writer may read
    dedup_readable_only: bool = False
    # redistribute moves only rows the requester may change
    redistribute_row_scope: bool = False
    # an agent reads its own team rows wherever they sit: after a move they are outside its
    # home fleet, where MemClaw's predicate wants trust 2 even of their author (issue 34)
    author_reads_own_rows: bool = False
    # --- governance over time (issue 24, the `dynamics` experiment) ---
    # a row past its `expires_at` is gone from every path (GET, contradictions, entity
    # links, list, search and recall, duplicate gates), as a soft-deleted row is; MemClaw
    # stores expires_at and filters on it nowhere (WIRE.md, storage columns)
    expired_rows_hidden: bool = False
    # deleting an agent retires its rows to an owner id nobody holds, so an agent re-created
    # under the same id owns nothing its predecessor wrote (MemClaw: rows belong to the id)
    deleted_agent_rows_retired: bool = False
    # a bulk write re-checks its caller's grant (agent record and key) before each item and
    # stops at a revocation, answering how many items it wrote (MemClaw: checked once, at
    # the start; the items after a deletion are written under the deleted agent's id)
    bulk_stops_at_revocation: bool = False
    # deleting a row withdraws (soft-deletes) the insights derived from it (the insight
    # memories whose `related_memory_ids` name it), so no insight keeps repeating what was
    # forgotten (MemClaw: an insight is a memory of its own and outlives its sources)
    derived_insights_withdrawn: bool = False


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    # Sub-tenant governance at all (False = flat per-tenant store).
    governed: bool
    # GET-by-id and /contradictions apply the full scope predicate + trust ladder.
    byid_read_scope: bool
    # Search identity = filter_agent_id, or also the agent key's own identity.
    search_identity_from_key: bool
    write_steps: tuple[str, ...]
    search_steps: tuple[str, ...]
    near_duplicate_threshold: float = 0.97
    # Redistribute: trust the requester needs between siblings of one fleet, and otherwise.
    redistribute_trust_sibling: int = 3
    redistribute_trust_cross_fleet: int = 3
    contradiction_detection: bool = True
    detection_delay_s: float = 0.2
    write_rate: str = "10/second"
    search_rate: str = "100/minute"
    bulk_rate: str = "2/second"
    # Rate-limit bucket: "tenant" (the paper's statement) or "key" (MemClaw's code).
    rate_limit_key: str = "tenant"
    min_similarity: float = 0.3
    keyword_weight: float = 0.3
    similarity_blend: float = 0.85
    # Recall expands from entities named in the query over entity links (MemClaw: 2 hops).
    graph_max_hops: int = 2
    latency: LatencyModel | None = None
    # MemClaw v2.29 (`memclaw-2.29`): a search whose filter_agent_id differs from the
    # caller's agent identity is refused (403) instead of searching as that agent.
    search_filter_agent_must_match: bool = False
    # MemClaw's open engine (`memclaw-2.29`): a tenant-level credential's client-sent
    # X-Agent-ID is the caller's agent identity (its shared-gate path reads the raw header);
    # a managed gateway strips it for tenant keys (False).
    agent_id_from_header: bool = False
    # A trust-0 agent (read-only rung) may not change a row's status either (the kit's rule,
    # issue 12); MemClaw's engine checks only the row's scope there (`memclaw-2.29`: False).
    status_change_needs_write_trust: bool = True
    # --- hostile input (issue 25): what the engine does, and what `hardened` does instead --
    # entity_links naming no entity of the tenant: "store" them as sent (dangling), "drop"
    # them and keep the memory (MemClaw v2.29: 201, the answer lists only the links made), or
    # "refuse" the write (422); max_entity_links bounds their count (None: MemClaw, unbounded).
    unknown_entity_links: str = "store"
    max_entity_links: int | None = None
    # X-RateLimit-Limit/-Remaining: "usage-stub" (MemClaw's open-source usage meter reports
    # no limit: the string "None") on the listed paths and nothing on a 429, or "window" (the
    # limiter's own limit and remaining, and Retry-After with them on a 429).
    rate_limit_headers: str = "usage-stub"
    rate_limit_header_paths: tuple[str, ...] = ("write",)
    # Numbers in a request body must be JSON numbers (MemClaw's pydantic coerces true, "5").
    strict_numbers: bool = False
    # MemClaw's engine (`memclaw-2.29`), as it answered the kit (reports/FIDELITY.md):
    # every entity link must carry `role` (422 `Field required`; False: it defaults to
    # "mentioned"); a write whose agent is asserted rather than a verified agent key must
    # name it in the body (422 `agent_id is required` outside standalone mode; False: the
    # asserted X-Agent-ID is the writer); the bulk route skips the trust-0 approval gate that
    # refuses a single write (its broker fan-in path; True: bulk refuses trust 0 too).
    entity_link_role_required: bool = False
    asserted_writer_named_in_body: bool = False
    bulk_write_approval_gate: bool = True
    # ... a bulk attempt id is unique per (tenant, fleet), so a replay from another fleet
    # writes new rows and one from the same fleet answers with the attempt's row ids (False:
    # tenant-wide); bulk items' entity links are not stored (True: stored as on a single
    # write); /recall's caller identity is filter_agent_id alone (no key or X-Agent-ID
    # identity, no match check: the fleet rule applies only with it; False: as search).
    bulk_attempts_per_fleet: bool = False
    bulk_keeps_entity_links: bool = True
    recall_identity_filter_only: bool = False
    # ... and a search or recall surfaces a `conflicted` row, unpenalised, when the query
    # matches it lexically (every query term in the row: its full-text carve-out for "the
    # row the caller named"); False: conflicted rows are hidden unless asked for by status.
    conflicted_exact_match_surfaces: bool = False
    # ... and DELETE checks the caller (registered, trust 3) before it looks the row up, so
    # an agent below trust 3 gets the same 403 for any id, existing or not (False: 404 for
    # an absent id first, an existence oracle for such a caller).
    delete_caller_checked_first: bool = False
    # ... and a write (single or bulk) naming a fleet gives a home-less agent that home
    # before any check, even when the write is then refused (False: writes never re-home).
    write_homes_agent: bool = False
    # MemClaw's code of 2026-05-28 (e2d805e, core-api routes/memories.py): PATCH and DELETE
    # take the agent identity from the `agent_id` query parameter alone (the verified agent
    # credential is not consulted; its list does too, not yet fitted here) and PATCH
    # .../status checks the tenant alone; 045039f's remediation made the authenticated agent
    # take precedence on PATCH, status and DELETE (False: the credential's identity first).
    agent_query_is_identity: bool = False
    hardening: Hardening = Hardening()

    def with_overrides(self, **changes: object) -> Profile:
        """A copy with CLI overrides applied (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def effective_detection_delay_s(self) -> float:
        return self.latency.detection_delay_s if self.latency else self.detection_delay_s


MEMCLAW_2026_05_30 = Profile(
    name="memclaw-2026-05-30",
    description="As measured in the paper: GET-by-id checks the tenant only; search identity "
    "from filter_agent_id only; near-duplicate gate before the async detector; "
    "redistribute needs trust 3; PATCH and DELETE govern by the agent_id query only, PATCH "
    "status by the tenant only; bulk writes skip the trust-0 gate, keep no entity links and "
    "scope attempt ids per fleet; a write naming a fleet homes a home-less agent.",
    governed=True,
    byid_read_scope=False,
    search_identity_from_key=False,
    write_steps=MEASURED_WRITE_STEPS,
    search_steps=SEARCH_STEPS,
    # fitted to MemClaw's code of the day (e2d805e, matrix seed 11; docs/profiles.md):
    agent_query_is_identity=True,
    bulk_write_approval_gate=False,
    bulk_attempts_per_fleet=True,
    bulk_keeps_entity_links=False,
    write_homes_agent=True,
)

# What 05-30 was fitted away from (the kit's choices before e2d805e ran here): the profiles
# derived from it keep them until each is scored against its own engine commit.
UNFITTED_WRITE_CHOICES: dict[str, object] = {
    "agent_query_is_identity": False, "bulk_write_approval_gate": True,
    "bulk_attempts_per_fleet": False, "bulk_keeps_entity_links": True,
    "write_homes_agent": False}

MEMCLAW_2026_05_31 = replace(
    MEMCLAW_2026_05_30,
    name="memclaw-2026-05-31",
    description="As remediated: GET-by-id applies the full scope predicate and trust ladder "
    "(404 when denied); search identity = filter_agent_id or the agent key's identity; "
    "PATCH, PATCH status and DELETE govern by the authenticated agent; DELETE checks the "
    "caller's trust before the row, PATCH status the row's scope only; /recall's identity "
    "stays filter_agent_id; bulk writes as on 05-30.",
    byid_read_scope=True,
    search_identity_from_key=True,
    # fitted to MemClaw's code at the end of the measurement day (045039f, matrix seed 11;
    # docs/profiles.md): the remediation changed identity on PATCH/status/DELETE, list and
    # search, and left bulk writes and /recall as e2d805e had them
    agent_query_is_identity=False,
    delete_caller_checked_first=True,
    status_change_needs_write_trust=False,
    recall_identity_filter_only=True,
)

# What 05-31 was fitted away from: `proposed` (and `hardened` above it) keep the kit's
# earlier choices, so their committed runs keep their meaning; they have no engine commit.
UNFITTED_REMEDIATION_CHOICES: dict[str, object] = {
    **UNFITTED_WRITE_CHOICES, "delete_caller_checked_first": False,
    "status_change_needs_write_trust": True, "recall_identity_filter_only": False}

PROPOSED = replace(
    MEMCLAW_2026_05_31,
    **UNFITTED_REMEDIATION_CHOICES,  # type: ignore[arg-type]
    name="proposed",
    description="05-31 plus the paper's section 9: RDF writes on single-valued predicates "
    "bypass the near-duplicate gate and reach the structural detector; sibling redistribute "
    "inside one fleet at trust 1, cross-fleet re-homing keeps trust 3.",
    write_steps=PROPOSED_WRITE_STEPS,
    redistribute_trust_sibling=1,
)

NAIVE = replace(
    MEMCLAW_2026_05_30,
    **UNFITTED_WRITE_CHOICES,  # type: ignore[arg-type]
    name="naive",
    description="A flat per-tenant store: no sub-tenant scope anywhere, no dedup, no "
    "supersession.",
    governed=False,
    write_steps=NAIVE_WRITE_STEPS,
    search_steps=NAIVE_SEARCH_STEPS,
    contradiction_detection=False,
    redistribute_trust_sibling=0,
    redistribute_trust_cross_fleet=0,
)

HARDENED = replace(
    PROPOSED,
    name="hardened",
    description="proposed plus every gap the governance matrix finds closed: search and list "
    "apply the by-id predicate with the key's own identity, no side effects on search, entity "
    "and agent reads scoped, PATCH status under the PATCH rules, attempt ids, idempotency keys "
    "and near-duplicate answers scoped to what the writer may see, redistribute only rows the "
    "requester may change.",
    hardening=Hardening(**{f: not v for f, v in Hardening().__dict__.items()}),
    unknown_entity_links="refuse",
    max_entity_links=100,
    rate_limit_headers="window",
    rate_limit_header_paths=("write", "bulk", "search", "recall"),
    strict_numbers=True,
)

MEMCLAW_2_29 = replace(
    MEMCLAW_2026_05_31,
    name="memclaw-2.29",
    description="MemClaw's open-source engine v2.29.0 (2026-08), from the wire spec and "
    "checked against the engine: 05-31 scope, plus a tenant credential's X-Agent-ID is the "
    "caller's identity (shared-gate path), filter_agent_id other than that identity -> 403, "
    "search limited at 30/second per key; entity links need a role, an asserted writer is "
    "named in the body, bulk writes skip the trust-0 approval gate, keep no entity links and "
    "scope attempt ids per fleet; /recall's identity is filter_agent_id alone; a conflicted "
    "row the query matches word for word is searchable; DELETE checks the caller's trust "
    "before the row; a fast-mode write names its near duplicate in its metadata.",
    write_steps=ENGINE_2_29_WRITE_STEPS,
    search_filter_agent_must_match=True,
    agent_id_from_header=True,
    status_change_needs_write_trust=False,
    entity_link_role_required=True,
    asserted_writer_named_in_body=True,
    bulk_write_approval_gate=False,
    bulk_attempts_per_fleet=True,
    bulk_keeps_entity_links=False,
    recall_identity_filter_only=True,
    conflicted_exact_match_surfaces=True,
    delete_caller_checked_first=True,
    write_homes_agent=True,
    search_rate="30/second",
    rate_limit_key="key",
    # the engine (v2.29.0, observed): links to unknown entities dropped, the write kept;
    # "None" rate-limit headers on search as on write
    unknown_entity_links="drop",
    rate_limit_header_paths=("write", "search"),
)

PROFILES: dict[str, Profile] = {
    p.name: p for p in (MEMCLAW_2026_05_30, MEMCLAW_2026_05_31, PROPOSED, NAIVE, MEMCLAW_2_29,
                        HARDENED)
}
DEFAULT_PROFILE = MEMCLAW_2026_05_30.name


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(PROFILES)
        raise ValueError(f"unknown profile {name!r}; choose one of: {known}") from None
