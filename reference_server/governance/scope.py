"""Inv-Scope (paper section 3): who may see or change which memory row.

The one place this is decided. Every read path asks it: GET by id, list, search (and the
rows its entity-graph expansion reaches or walks through), contradictions, entity linked
memories, redistribute, insights. The predicates follow MemClaw's
engine (WIRE.md 4.3 and 4.4, SEARCH-LEAK.md section 5); a profile only chooses whether a
path applies them (`Profile.governed`, `Profile.byid_read_scope`).

Trust ladder (paper 7.1): 0 read-only, 1 write home fleet, 2 cross-fleet read,
3 cross-fleet write and redistribute.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..storage import AgentRow, now_iso
from .profiles import Profile

CROSS_FLEET_READ_TRUST = 2
CROSS_FLEET_WRITE_TRUST = 3
DELETE_TRUST = 3
HIDDEN_BY_DEFAULT = ("outdated", "conflicted")
# English stop words PostgreSQL's `english` text search configuration drops (the common ones)
STOP_WORDS = frozenset(
    "a an and are as at be but by for from has have he her his i if in into is it its me my "
    "no not of on or our she so that the their them then there these they this to was we "
    "were what when where which while who will with you your".split())


@dataclass(frozen=True)
class Viewer:
    """The identity a path governs by: an agent id (None = identity-less tenant credential)
    and its agent row when the agent is registered."""

    agent_id: str | None
    agent: AgentRow | None = None


@dataclass(frozen=True)
class SearchScope:
    viewer: Viewer
    fleet_ids: Collection[str]  # a frozenset in practice (O(1) membership)
    filter_agent_id: str | None
    status_filter: str | None
    memory_type_filter: str | None
    # the query's terms, for `conflicted_exact_match_surfaces` (empty: no lexical carve-out)
    query_terms: frozenset[str] = frozenset()


def lexical_terms(text: str) -> frozenset[str]:
    """Lower-cased words of a text (stop words out): PostgreSQL `plainto_tsquery` without
    stemming, for the engine's exact-lexical-match test."""
    return frozenset(w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS)


def lexically_matched(scope: SearchScope, row: dict) -> bool:
    """Every term of the query appears in the row (the engine's `search_vector @@ query`)."""
    return bool(scope.query_terms) and scope.query_terms <= lexical_terms(row["content"])


def expired(profile: Profile, row: dict) -> bool:
    """A row past its `expires_at`, where the profile forgets such rows (hardened)."""
    return (profile.hardening.expired_rows_hidden and row.get("expires_at") is not None
            and row["expires_at"] <= now_iso())


def row_access_allowed(profile: Profile, viewer: Viewer, row: dict, write: bool = False) -> bool:
    """MemClaw's `authorize_memory_access` (WIRE.md 4.4)."""
    if not profile.governed or viewer.agent_id is None:
        return True  # flat store, or tenant-wide credential
    if row["visibility"] == "scope_agent":
        return row["agent_id"] == viewer.agent_id
    if row["visibility"] == "scope_org" or viewer.agent is None:
        return True
    if row["fleet_id"] is None or row["fleet_id"] == viewer.agent.fleet_id:
        return True
    if (not write and profile.hardening.author_reads_own_rows
            and row["agent_id"] == viewer.agent_id):
        return True
    needed = CROSS_FLEET_WRITE_TRUST if write else CROSS_FLEET_READ_TRUST
    return viewer.agent.trust_level >= needed


def byid_read_allowed(profile: Profile, viewer: Viewer, row: dict) -> bool:
    """GET by id, contradictions, entity linked memories. As measured on 2026-05-30 the
    handler checked the tenant only (the caller's tenant was already enforced)."""
    if expired(profile, row):
        return False
    if not profile.byid_read_scope:
        return True
    return row_access_allowed(profile, viewer, row)


def list_row_visible(profile: Profile, viewer: Viewer, row: dict,
                     access: Viewer | None = None) -> bool:
    """List: own `scope_agent` rows plus every team/org row; identity-less: no private rows.
    `access` is whose by-id rule `list_row_access` applies (default the viewer; hardened: the
    credential's own identity, never a filter's). The list `fleet_id` filter is strict and
    applied by the store."""
    if expired(profile, row):
        return False
    if not profile.governed:
        return True
    access = access or viewer
    if (profile.hardening.list_row_access and access.agent_id is not None
            and not row_access_allowed(profile, access, row)):
        return False
    if row["visibility"] != "scope_agent":
        return True
    return viewer.agent_id is not None and row["agent_id"] == viewer.agent_id


def search_row_visible(profile: Profile, scope: SearchScope, row: dict) -> bool:
    """SEARCH-LEAK.md section 5, rules 4 to 7, for one candidate row."""
    if row["deleted_at"] is not None or expired(profile, row):
        return False
    if profile.governed:
        if scope.fleet_ids and not (row["fleet_id"] in scope.fleet_ids
                                    or row["fleet_id"] is None
                                    or row["visibility"] == "scope_org"):
            return False  # rule 4
        if row["visibility"] == "scope_agent" and row["agent_id"] != scope.viewer.agent_id:
            return False  # rule 5 (no identity: every private row is dropped)
        if profile.hardening.search_row_access and not row_access_allowed(
                profile, scope.viewer, row):
            return False  # hardened: the by-id predicate (trust ladder) on every candidate
    if scope.filter_agent_id is not None and row["agent_id"] != scope.filter_agent_id:
        return False  # rule 6
    if scope.status_filter is None:
        if row["status"] in HIDDEN_BY_DEFAULT and not (
                profile.conflicted_exact_match_surfaces and row["status"] == "conflicted"
                and lexically_matched(scope, row)):
            return False  # rule 7 (2.29: a conflicted row the query names comes back)
    elif row["status"] != scope.status_filter:
        return False
    return scope.memory_type_filter is None or row["memory_type"] == scope.memory_type_filter


def insight_source_visible(profile: Profile, viewer: Viewer, row: dict, insight_scope: str,
                           fleet_id: str | None) -> bool:
    """Rows `POST /insights/generate` may summarise for the caller: live, readable by the
    caller under the by-id rule (home fleet, or trust 2 across fleets), narrowed to the
    caller's own rows (`agent`) or one fleet (`fleet`)."""
    if row["deleted_at"] is not None or row["status"] == "deleted":
        return False
    if insight_scope == "agent" and row["agent_id"] != viewer.agent_id:
        return False
    if insight_scope == "fleet" and row["fleet_id"] != fleet_id:
        return False
    return row_access_allowed(profile, viewer, row)


def search_predicate_sql(profile: Profile, scope: SearchScope,
                         mark: str = "%s") -> tuple[str, list[Any]]:
    """`search_row_visible` as one SQL boolean (and its parameters), for a store that filters
    in the query (PostgreSQL, as MemClaw does). The same rules 4 to 7, clause for clause;
    tests/server/test_storage_conformance.py checks both agree on every row and principal
    of an enumerated set. `mark` is the driver's placeholder."""
    where, args = ["deleted_at IS NULL"], []
    if profile.hardening.expired_rows_hidden:
        where.append(f"(expires_at IS NULL OR expires_at > {mark})")
        args.append(now_iso())
    if profile.governed:
        if scope.fleet_ids:
            if mark == "%s":  # psycopg: one array parameter, whatever the list's length
                in_fleets, fleet_args = f"fleet_id = ANY({mark})", [list(scope.fleet_ids)]
            else:  # a driver without arrays (SQLite in the conformance test)
                in_fleets = f"fleet_id IN ({', '.join(mark for _ in scope.fleet_ids)})"
                fleet_args = list(scope.fleet_ids)
            where.append(f"({in_fleets} OR fleet_id IS NULL "
                         "OR visibility = 'scope_org')")  # rule 4
            args.extend(fleet_args)
        if scope.viewer.agent_id is None:
            where.append("visibility <> 'scope_agent'")  # rule 5, no identity
        else:
            where.append(f"(visibility <> 'scope_agent' OR agent_id = {mark})")  # rule 5
            args.append(scope.viewer.agent_id)
    if scope.filter_agent_id is not None:
        where.append(f"agent_id = {mark}")  # rule 6
        args.append(scope.filter_agent_id)
    if scope.status_filter is None:
        # rule 7 (2.29: conflicted rows pass here; the Python rule keeps the matched ones)
        hidden = tuple(s for s in HIDDEN_BY_DEFAULT if not (
            profile.conflicted_exact_match_surfaces and s == "conflicted"))
        marks = ", ".join(mark for _ in hidden)
        where.append(f"status NOT IN ({marks})")
        args.extend(hidden)
    else:
        where.append(f"status = {mark}")
        args.append(scope.status_filter)
    if scope.memory_type_filter is not None:
        where.append(f"memory_type = {mark}")
        args.append(scope.memory_type_filter)
    return "(" + " AND ".join(where) + ")", args


@dataclass(frozen=True)
class SearchFilter:
    """What a search may return: the scope rules plus the `valid_at` hard filter. A store
    may apply it in its query (`sql`); the search path still asks `admits` of every row."""

    profile: Profile
    scope: SearchScope
    valid_at: str | None = None

    def admits(self, row: dict) -> bool:
        if not search_row_visible(self.profile, self.scope, row):
            return False
        start = row["ts_valid_start"]
        return self.valid_at is None or start is None or start[:10] <= self.valid_at[:10]

    @property
    def fleet_ids(self) -> Collection[str]:
        return self.scope.fleet_ids

    @property
    def fleet_scope(self) -> Collection[str] | None:
        """Rule 4 seen from a store: outside these fleets only fleet-less and `scope_org`
        rows can pass; None when the filter does not narrow by fleet."""
        return self.scope.fleet_ids if self.profile.governed and self.scope.fleet_ids else None

    def with_fleet_ids(self, fleet_ids: Collection[str]) -> SearchFilter:
        return replace(self, scope=replace(self.scope, fleet_ids=fleet_ids))

    def sql(self, mark: str = "%s") -> tuple[str, list[Any]]:
        clause, args = search_predicate_sql(self.profile, self.scope, mark)
        if self.valid_at is not None:
            clause = (f"({clause} AND (ts_valid_start IS NULL "
                      f"OR substr(ts_valid_start, 1, 10) <= {mark}))")
            args = [*args, self.valid_at[:10]]
        return clause, args


def fleet_read_allowed(profile: Profile, agent: AgentRow | None, fleet_id: str) -> bool:
    """`enforce_fleet_read`: an unknown agent soft-passes; otherwise home fleet or trust 2."""
    if not profile.governed or agent is None:
        return True
    return fleet_id == agent.fleet_id or agent.trust_level >= CROSS_FLEET_READ_TRUST


def fleet_write_allowed(profile: Profile, agent: AgentRow | None, fleet_id: str | None) -> bool:
    """`enforce_fleet_write`: fleet-less or home fleet, else trust 3."""
    if not profile.governed or agent is None or fleet_id is None:
        return True
    return fleet_id == agent.fleet_id or agent.trust_level >= CROSS_FLEET_WRITE_TRUST


def write_approved(profile: Profile, agent: AgentRow) -> bool:
    """Trust 0 is read-only."""
    return not profile.governed or agent.trust_level >= 1


def delete_denial(profile: Profile, viewer: Viewer, row: dict | None) -> str | None:
    """Why a delete is refused (None = allowed). With an agent identity a delete needs
    trust 3 and write access to the row (None: the caller's part only, before any row is
    looked up); a tenant key without agent_id is unrestricted."""
    if not profile.governed or viewer.agent_id is None:
        return None
    if viewer.agent is None:
        return f"Agent '{viewer.agent_id}' is not registered and cannot delete memories."
    if viewer.agent.trust_level < DELETE_TRUST:
        home = viewer.agent.fleet_id or "none"
        return f"access policy: principals of fleet '{home}' are not permitted to delete memories."
    if row is not None and not row_access_allowed(profile, viewer, row, write=True):
        return f"Agent '{viewer.agent_id}' cannot delete memory in fleet '{row['fleet_id']}'."
    return None


def status_change_denial(profile: Profile, viewer: Viewer, row: dict) -> str | None:
    """`PATCH /memories/{id}/status` (None = allowed). MemClaw checks the row scope only;
    a status change is an update, so the trust ladder's rung 0 (read-only: writes and
    updates refused, WIRE.md 4.1) applies too: a restricted agent cannot retire or revive
    rows. Identity-less tenant credentials stay unrestricted, as for updates."""
    if not profile.governed or viewer.agent_id is None:
        return None
    if profile.hardening.status_patch_update_rules:  # hardened: a status change is an update
        return update_denial(profile, viewer, row)
    if (profile.status_change_needs_write_trust and viewer.agent is not None
            and viewer.agent.trust_level < 1):
        return f"access policy: agent '{viewer.agent_id}' is restricted from updates."
    if not row_access_allowed(profile, viewer, row, write=True):
        return f"Agent '{viewer.agent_id}' cannot modify memory in fleet '{row['fleet_id']}'."
    return None


def update_denial(profile: Profile, viewer: Viewer, row: dict) -> str | None:
    """MemClaw's `enforce_update` plus the by-id write check (None = allowed)."""
    if not profile.governed or viewer.agent_id is None:
        return None
    if viewer.agent is None:
        return f"Agent '{viewer.agent_id}' is not registered and cannot update memories."
    if viewer.agent.trust_level < 1:
        return f"access policy: agent '{viewer.agent_id}' is restricted from updates."
    if viewer.agent.trust_level < CROSS_FLEET_WRITE_TRUST and row["agent_id"] != viewer.agent_id:
        return f"access policy: agent '{viewer.agent_id}' may only update its own memories."
    if not row_access_allowed(profile, viewer, row, write=True):
        return f"Agent '{viewer.agent_id}' cannot modify memory in fleet '{row['fleet_id']}'."
    return None


def redistribute_requester_denial(profile: Profile, agent_id: str,
                                  requester: AgentRow | None) -> str | None:
    """Before any target or row is looked up (MemClaw checks the requester first, WIRE.md
    2.9): an unregistered requester, or one below every redistribute rung, is refused even
    for an unknown target (None = may go on)."""
    if not profile.governed:
        return None
    if requester is None:
        return (f"Agent '{agent_id}' requires trust_level >= "
                f"{profile.redistribute_trust_cross_fleet} for redistribute.")
    lowest = min(profile.redistribute_trust_sibling, profile.redistribute_trust_cross_fleet)
    if requester.trust_level < lowest:
        return f"Agent '{agent_id}' requires trust_level >= {lowest} for redistribute."
    return None


def redistribute_target_denial(profile: Profile, target: AgentRow) -> str | None:
    """A restricted agent (trust 0) receives no rows."""
    if profile.governed and target.trust_level < 1:
        return (f"Target agent '{target.agent_id}' is restricted (trust_level=0). "
                "Cannot assign memories to a restricted agent.")
    return None


def redistribute_gate(profile: Profile, requester: AgentRow, target: AgentRow,
                      rows: Sequence[dict]) -> tuple[int, list[dict]]:
    """The trust the requester needs, and the rows it may move.

    MemClaw treats every redistribute as an administrative migration (trust 3, any row of
    the tenant). A profile may open a sibling path (paper 9.3): requester and target share
    a home fleet and every row lives in it; then the requester moves only rows it can read.
    """
    if not profile.governed:
        return profile.redistribute_trust_cross_fleet, list(rows)
    if requester.trust_level >= profile.redistribute_trust_cross_fleet:
        if profile.hardening.redistribute_row_scope:  # only rows the requester may change
            viewer = Viewer(requester.agent_id, requester)
            rows = [r for r in rows if update_denial(profile, viewer, r) is None]
        return profile.redistribute_trust_cross_fleet, list(rows)
    fleet = requester.fleet_id
    sibling = (fleet is not None and target.fleet_id == fleet
               and all(r["fleet_id"] == fleet for r in rows))
    if not sibling:
        return profile.redistribute_trust_cross_fleet, list(rows)
    viewer = Viewer(requester.agent_id, requester)
    return profile.redistribute_trust_sibling, [
        r for r in rows if row_access_allowed(profile, viewer, r)
        and not (profile.hardening.redistribute_row_scope and update_denial(profile, viewer, r))]


def _team_row_of(fleet_id: str | None, agent_id: str | None = None) -> dict:
    return {"visibility": "scope_team", "fleet_id": fleet_id, "agent_id": agent_id}


def entity_read_allowed(profile: Profile, viewer: Viewer, entity: dict) -> bool:
    """Hardened: an entity is read like a team row of its fleet (the trust ladder applies)."""
    if not profile.hardening.entity_scope:
        return True
    return row_access_allowed(profile, viewer, _team_row_of(entity["fleet_id"]))


def entity_write_denial(profile: Profile, agent: AgentRow | None,
                        fleet_id: str | None) -> str | None:
    """Hardened: an entity upsert by an agent follows the write gates of a memory write."""
    if not profile.hardening.entity_scope or agent is None:
        return None
    if not write_approved(profile, agent):
        return (f"Agent '{agent.agent_id}' is not approved. Contact tenant admin to set "
                "trust_level >= 1.")
    if not fleet_write_allowed(profile, agent, fleet_id):
        return (f"fleet-scope policy: fleet '{fleet_id}' is not writable by principals of "
                f"fleet '{agent.fleet_id or 'none'}'.")
    return None


def agent_read_allowed(profile: Profile, viewer: Viewer, target: AgentRow) -> bool:
    """Hardened: an agent record is read like a team row of the agent's home fleet."""
    if not profile.hardening.agent_read_scope:
        return True
    return row_access_allowed(profile, viewer, _team_row_of(target.fleet_id, target.agent_id))
