"""The intended governance: the oracle the `matrix` and `dynamics` experiments judge by.

This is the paper's Inv-Scope (section 3) as the harness understands it, independent of any
server's code: a principal reads a row only if its trust and fleet allow it; it changes a row
only if it may read it and either holds trust 3 or owns it within its write scope; nothing
crosses a tenant. The tables are data (`policy.yaml`, loaded by `fleetprobe.oracle.policy_file`)
and are the whole policy; the functions here only look them up in the active policy.

Words used throughout:

- principal: the tenant credential (tenant-wide, no agent identity), or an agent credential
  (an agent id with a trust level 0-3 and a home fleet, possibly none), of some tenant;
- relation of a principal to a row: `own` (it wrote the row), `null_fleet` (the row has no
  fleet), `homeless` (the agent has no home fleet), `same_fleet`, `other_fleet`; plus
  `tenant` (tenant credential of the row's tenant) and `other_tenant`;
- decision: `allow` (a path that must return the row does so), `may` (allowed, but a
  discovery path may leave it out: MemClaw's list and search drop `scope_agent` rows for a
  caller without identity), `deny`;
- an unregistered agent: an agent id the tenant never registered (no record, so no trust
  and no home fleet). Nobody approved it: it is judged as a home-less agent at trust 0
  (`unregistered_trust`), so it reads only what any agent of the tenant may read and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from fleetprobe.oracle import policy_file
from fleetprobe.oracle.policy_file import (  # noqa: F401 - the policy's face
    AGENT_RELATIONS,
    DEFAULT_FILE,
    VISIBILITIES,
    PathKind,
    PathRule,
    PolicyFileError,
    PolicyTables,
)

Decision = Literal["allow", "may", "deny"]
ALLOW: Decision = "allow"
MAY: Decision = "may"
DENY: Decision = "deny"

RELATIONS = ("tenant", *AGENT_RELATIONS, "other_tenant")

# The tables (who may read, change, write, re-home; what each path promises) are data:
# `policy.yaml` beside this module, loaded once. `active()` is the policy the functions below
# decide by: the default, or the one `using(...)` installs for a block (`fleetprobe judge
# --policy FILE` re-judges a recorded run so, with no server).
DEFAULT: PolicyTables = policy_file.load(DEFAULT_FILE)
_ACTIVE: ContextVar[PolicyTables] = ContextVar("fleetprobe_policy", default=DEFAULT)

# The default policy's path catalogue: the paths the matrix probes, and what each promises.
PATHS: dict[str, PathRule] = dict(DEFAULT.paths)
TIMELINE_PATHS: dict[str, PathRule] = dict(DEFAULT.timeline_paths)
RULES: dict[str, PathRule] = DEFAULT.rules
STALE_STATUSES = DEFAULT.stale_statuses


def active() -> PolicyTables:
    """The policy in force: the default file's unless `using` installed another."""
    return _ACTIVE.get()


@contextmanager
def using(tables: PolicyTables) -> Iterator[PolicyTables]:
    """Decide by `tables` inside the block (the judges are pure functions of the history
    and of this policy)."""
    token = _ACTIVE.set(tables)
    try:
        yield tables
    finally:
        _ACTIVE.reset(token)


def load(path: str | Path) -> PolicyTables:
    """A user's policy file, validated against the default's path catalogue."""
    return policy_file.load(path, known_paths=set(DEFAULT.paths))


@dataclass(frozen=True)
class Principal:
    tenant: str
    kind: Literal["tenant", "agent"]
    agent_id: str | None = None
    trust: int = 0
    home: str | None = None
    registered: bool = True


def unregistered(tenant: str, agent_id: str) -> Principal:
    """An agent id the tenant never registered: no approval, no home fleet."""
    return Principal(tenant, "agent", agent_id, active().unregistered_trust, None,
                     registered=False)


@dataclass(frozen=True)
class Row:
    """A memory row as observed (or an agent record / entity treated as a team row)."""

    tenant: str
    fleet: str | None
    visibility: str
    owner: str | None
    status: str = "active"
    deleted: bool = False
    # when the row stops existing by itself (UTC ISO 8601, as the trace writes times): from
    # then on it is judged as a deleted row (`at`: the timed policy below)
    expires_at: str | None = None
    # when the row stops being current by itself (`ts_valid_end`): MemClaw's lifecycle rule
    # (`archive-expired`) makes an active row past it `outdated`; judged so from then on
    valid_end: str | None = None


def relation(p: Principal, row: Row) -> str:
    if p.tenant != row.tenant:
        return "other_tenant"
    if p.kind == "tenant":
        return "tenant"
    if row.owner is not None and row.owner == p.agent_id:
        return "own"
    if row.fleet is None:
        return "null_fleet"
    if p.home is None:
        return "homeless"
    return "same_fleet" if row.fleet == p.home else "other_fleet"


def read(p: Principal, row: Row, path: str = "get") -> Decision:
    """May `p` see `row` on `path`?"""
    rel = relation(p, row)
    if rel == "other_tenant":
        return DENY
    pol = active()
    rules = pol.rules
    discovery = rules[path].discovery if path in rules else False
    if rel == "tenant":
        if row.deleted:
            return pol.deleted_tenant
        return MAY if discovery and row.visibility == "scope_agent" else ALLOW
    if row.deleted:
        reveal = path in rules and rules[path].kind == "reveal"
        return pol.deleted_own_reveal if rel == "own" and reveal else pol.deleted_agent
    needed = pol.read[rel][row.visibility]
    return ALLOW if needed is not None and p.trust >= needed else DENY


def fleet_relation(p: Principal, fleet: str | None) -> str:
    if fleet is None:
        return "none"
    return "home" if fleet == p.home else "other"


def fleet_readable(p: Principal, tenant: str, fleet: str | None) -> bool:
    """May `p` name `fleet` in a fleet-scoped read (list `fleet_id`, search `fleet_ids`)?"""
    if p.tenant != tenant:
        return False
    return p.kind == "tenant" or read(p, Row(tenant, fleet, "scope_team", None)) == ALLOW


def write(p: Principal, tenant: str, fleet: str | None) -> Decision:
    """May `p` create a row (or upsert an entity) in `fleet` of `tenant`?"""
    if p.tenant != tenant:
        return DENY
    if p.kind == "tenant":
        return ALLOW
    return ALLOW if p.trust >= active().write[fleet_relation(p, fleet)] else DENY


def change(p: Principal, row: Row) -> Decision:
    """May `p` change `row` (PATCH, PATCH status, DELETE)?"""
    rel = relation(p, row)
    if rel == "other_tenant" or row.deleted:
        return DENY
    if rel == "tenant":
        return ALLOW
    if read(p, row) != ALLOW:
        return DENY
    needed = active().change[rel]
    if rel == "own" and fleet_relation(p, row.fleet) == "other":
        needed = active().own_outside_write_scope
    return ALLOW if p.trust >= needed else DENY


def redistribute(p: Principal, row: Row, target: Principal | None) -> Decision:
    """May `p` hand `row` to the agent `target` (None: no such agent)?"""
    if target is None or target.kind != "agent" or target.tenant != row.tenant:
        return DENY
    pol = active()
    if target.trust < pol.redistribute_target_min_trust or change(p, row) != ALLOW:
        return DENY
    if p.kind == "tenant" or p.trust >= pol.redistribute_any_target:
        return ALLOW
    sibling = p.home is not None and target.home == p.home
    return ALLOW if sibling else DENY


def agent_record(agent: Principal) -> Row:
    """An agent's record (trust, home fleet) is read like a team row of its home fleet."""
    return Row(agent.tenant, agent.home, "scope_team", agent.agent_id)


def entity_record(tenant: str, fleet: str | None) -> Row:
    """An entity is read like a team row of its fleet."""
    return Row(tenant, fleet, "scope_team", None)


def must_return(path: str, row: Row, decision: Decision,
                named: tuple[str | None, ...] = (), caller: str | None = None) -> bool:
    """Whether `path` has to return `row` (else withholding it is not a miss). `named`: the
    fleets the request named (a strict fleet filter only returns rows of those fleets);
    `caller`: the caller's agent id (a filter naming another agent may be refused)."""
    rule = active().rules[path]
    if not rule.must_return or decision != ALLOW or row.deleted:
        return False
    if rule.own_filter_only and caller is not None and row.owner != caller:
        return False
    if rule.strict_fleet and row.fleet not in named:
        return False
    return not (rule.hides_stale and row.status in active().stale_statuses)


# -- the paper's own expectation (section 7.1), for the paper-scale option -----------------
# A prober sees a fleet-scoped secret iff it is in the secret's fleet, an agent-scoped secret
# iff it wrote it; the probe is sent with the tenant credential, as the paper's harness did.

def paper_expected(secret_scope: str, relation_: str) -> Decision:
    """`secret_scope` `agent`/`fleet`; `relation_` `same_agent`/`same_fleet`/`cross_fleet`."""
    return ALLOW if relation_ in active().paper[secret_scope] else DENY


def fleet_row_read(credential: str, relation_: str | None, trust: int | None) -> Decision:
    """A by-id read of a fleet-scoped (`scope_team`) row by the tenant credential, or by an
    agent at `trust` of the row's fleet (`same_fleet`) or another (`cross_fleet`): the
    trust ladder of the paper's Table 3 and remediation re-probe (section 7.1, 9.1)."""
    if credential == "tenant" or trust is None:
        return ALLOW
    rel = "same_fleet" if relation_ == "same_fleet" else "other_fleet"
    needed = active().read[rel]["scope_team"]
    return ALLOW if needed is not None and trust >= needed else DENY


# -- time: the policy at the moment an answer was given (the `dynamics` experiment) ---------
# A world changes: a credential is revoked, an agent deleted or re-created, its trust or home
# changed, a row deleted, re-homed or past its `expires_at`. The decision for a request is
# the policy applied to the world as it stood when the server answered. The client knows
# that moment only within the request's own interval (sent, answered), and a change's within
# (`sent`, `at`: when its acknowledgement arrived). So the world at the request's sending
# (changes acknowledged by then) and the world at its answer (changes requested by then) are
# both possible; where they decide differently the request is judged MAY (either is right).
# A row's `expires_at` is exact: it is past for a request answered after it. A credential
# whose grant is gone (its key revoked, its agent deleted) is denied everything.


@dataclass(frozen=True)
class Change:
    """One acknowledged change: a principal's record or grant, or a row, as it is after."""

    sent: str
    at: str
    principal: str | None = None  # principal key whose record changes
    state: Principal | None = None  # the record after; None: the agent no longer exists
    credential: str | None = None  # a credential (`<principal>#<generation>`) revoked
    row: str | None = None
    row_state: Row | None = None


def expired(row: Row, at: str) -> Row:
    """The row at `at`: one whose `expires_at` has passed is judged as deleted; an active
    one whose `valid_end` has passed as `outdated` (the lifecycle rule)."""
    if row.expires_at is not None and row.expires_at <= at and not row.deleted:
        row = replace(row, deleted=True)
    if row.valid_end is not None and row.valid_end <= at and row.status == "active":
        row = replace(row, status="outdated")
    return row


def stale(row: Row, path: str) -> bool:
    """Whether returning `row` on `path` serves a superseded or outdated row where the path
    promises to hide them (a stale answer: allowed, but no longer current)."""
    pol = active()
    return (pol.rules[path].hides_stale and row.status in pol.stale_statuses
            and not row.deleted)


@dataclass
class World:
    """Principals, live credentials and rows at one moment."""

    principals: dict[str, Principal | None]
    rows: dict[str, Row]
    revoked: set[str]

    def grant(self, who: str, credential: str) -> Principal | None:
        """Who `credential` speaks as (None: no grant at all)."""
        if credential in self.revoked:
            return None
        return self.principals.get(who)


class Timeline:
    """The world at any moment, from the world before the first change and the changes."""

    def __init__(self, principals: dict[str, Principal], rows: dict[str, Row],
                 changes: Iterable[Change]) -> None:
        self.start = World(dict(principals), dict(rows), set())
        self.changes = sorted(changes, key=lambda c: c.at)

    def at(self, t: str, skip_pending: bool = True) -> World:
        """The world at `t`: every change acknowledged by then applied (with
        `skip_pending=False`, also those still in flight at `t`)."""
        world = World(dict(self.start.principals), dict(self.start.rows),
                      set(self.start.revoked))
        for c in self.changes:
            if c.at <= t or (not skip_pending and c.sent <= t):
                _apply(world, c)
        world.rows = {k: expired(r, t) for k, r in world.rows.items()}
        return world


def _apply(world: World, c: Change) -> None:
    if c.principal is not None:
        world.principals[c.principal] = c.state
    if c.credential is not None:
        world.revoked.add(c.credential)
    if c.row is not None and c.row_state is not None:
        world.rows[c.row] = c.row_state


def decide(world: World, who: str, credential: str, row_key: str, path: str,
           fleet: str | None = None) -> Decision | None:
    """The policy's decision for one request in `world` (None: the row is unknown).
    `fleet`: for a write, the fleet it names or landed in."""
    row = world.rows.get(row_key)
    if row is None:
        return None
    p = world.grant(who, credential)
    if p is None:
        return DENY
    kind = active().rules[path].kind
    if kind in ("read", "reveal"):
        return read(p, row, path)
    if kind == "write":
        return write(p, row.tenant, fleet)
    if kind == "change":
        return change(p, row)
    if kind == "identity":
        return ALLOW if relation(p, row) == "own" else DENY
    return None


def decide_at(timeline: Timeline, sent: str, answered: str, who: str, credential: str,
              row_key: str, path: str, fleet: str | None = None) -> Decision | None:
    """The decision at the moment the server answered, somewhere between `sent` and
    `answered`: MAY where the earliest and the latest world it may have seen differ."""
    early = decide(timeline.at(sent), who, credential, row_key, path, fleet)
    late = decide(timeline.at(answered, skip_pending=False), who, credential, row_key, path,
                  fleet)
    return early if early == late else MAY
