"""A list filter never hides a row the credential may read (issue 25): for every principal and
every list filter, `GET /memories?<filter>` returns every row of the unfiltered list that
matches the filter, and nothing the credential could not read by id. Checked on `hardened`
over an enumerated population (agents in two fleets at every trust rung, rows in their home
fleet, another fleet and no fleet, at every visibility). A tenant key filtered by an agent also
lists that agent's private rows, as MemClaw's list (it reads as the agent it names) does on
every profile: the tenant key may read them by id."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import HOSTILE_LIMIT_S, Api, ServerPool, ids

FLEETS = ("fleet-a", "fleet-b")
VISIBILITIES = ("scope_agent", "scope_team", "scope_org")
# (agent, home fleet, trust after writing): every rung, in both fleets
AGENTS = (("w1", "fleet-a", 1), ("w2", "fleet-b", 2), ("w0", "fleet-a", 0),
          ("w3", "fleet-b", 3))
FILTER_VALUES: dict[str, tuple[str | None, ...]] = {
    "agent_id": (None, "w1", "w2", "w0", "nobody"),
    "fleet_id": (None, *FLEETS),
    "memory_type": (None, "fact", "episode"),
}


def _matches(row: dict, flt: dict[str, str]) -> bool:
    return all(row[k] == v for k, v in flt.items())


def _filters() -> Iterator[dict[str, str]]:
    names = list(FILTER_VALUES)
    for values in itertools.product(*FILTER_VALUES.values()):
        yield {k: v for k, v in zip(names, values, strict=True) if v is not None}


@pytest.fixture(scope="module")
def population(pool: ServerPool) -> tuple[Api, dict[str, Api], dict[str, dict]]:
    """A fresh hardened tenant: each agent writes at trust 3 (so it can own rows outside its
    home fleet), then drops to its rung. Returns the tenant key, the agent keys and every
    written row by id."""
    tenant = pool.tenant_api("hardened", HOSTILE_LIMIT_S)
    keys: dict[str, Api] = {}
    rows: dict[str, dict] = {}
    for agent, home, trust in AGENTS:
        keys[agent] = key = tenant.provision(agent, home, trust=3)
        for n, (fleet, vis) in enumerate(itertools.product((*FLEETS, None), VISIBILITIES)):
            mtype = ("fact", "episode")[n % 2]
            body: dict[str, Any] = {"visibility": vis, "memory_type": mtype}
            if fleet is not None:
                body["fleet_id"] = fleet
            r = key.write(f"{agent} note {n}: row in {fleet} at {vis} for the list test",
                          **body)
            assert r.status_code == 201, r.text
            out = r.json()
            rows[out["id"]] = {"agent_id": agent, "fleet_id": out["fleet_id"],
                               "memory_type": mtype}
        r = tenant.http.patch(f"/agents/{agent}/trust", params={"tenant_id": tenant.tenant_id},
                              json={"trust_level": trust})
        assert r.status_code == 200, r.text
    return tenant, keys, rows


def _list(api: Api, **flt: str) -> set[str]:
    return ids(api.list(limit=500, **flt))


@pytest.mark.parametrize("principal", ["tenant", *(a for a, _, _ in AGENTS)])
def test_a_list_filter_never_hides_and_never_widens(
        population: tuple[Api, dict[str, Api], dict[str, dict]], principal: str) -> None:
    tenant, keys, rows = population
    api = tenant if principal == "tenant" else keys[principal]
    visible = _list(api)
    assert visible and visible <= set(rows)
    readable: dict[str, bool] = {}
    checked = 0
    for flt in _filters():
        if not flt:
            continue
        r = api.list(limit=500, **flt)
        if r.status_code == 403:  # an agent key naming a fleet it may not read
            assert principal != "tenant" and "fleet_id" in flt, (flt, r.text)
            assert r.json()["error"]["message"].startswith("fleet-scope policy"), r.text
            continue
        got = ids(r)
        assert {i for i in visible if _matches(rows[i], flt)} <= got, (principal, flt)
        assert all(_matches(rows[i], flt) for i in got), (principal, flt)
        for i in got - visible:  # only rows the credential reads by id anyway
            if i not in readable:
                readable[i] = api.get(i).status_code == 200
            assert readable[i], (principal, flt, i)
        checked += 1
    assert checked >= len(list(_filters())) // 2


def test_tenant_key_filtered_by_agent_sees_its_rows_in_every_fleet(
        population: tuple[Api, dict[str, Api], dict[str, dict]]) -> None:
    """The reported case: a trust-1 agent's team rows outside its home fleet stay in the
    tenant key's list when the list is filtered by that agent."""
    tenant, _, rows = population
    away = {i for i in _list(tenant) if rows[i]["agent_id"] == "w1"
            and rows[i]["fleet_id"] == "fleet-b"}
    assert away  # its team and org rows there
    assert away <= _list(tenant, agent_id="w1")


@pytest.mark.parametrize("profile", ["memclaw-2026-05-31", "hardened"])
def test_tenant_list_filtered_by_agent_shows_its_private_rows(pool: ServerPool,
                                                              profile: str) -> None:
    """MemClaw's list reads as the agent it names: a tenant key's list filtered by an agent
    shows that agent's private rows, which the unfiltered list leaves out (the census of the
    matrix experiment relies on it); hardened keeps it."""
    tenant = pool.tenant_api(profile, HOSTILE_LIMIT_S)
    key = tenant.provision("p1", "fleet-a")
    r = key.write("a private note kept by p1 for the list test", visibility="scope_agent")
    assert r.status_code == 201, r.text
    private = r.json()["id"]
    assert private not in _list(tenant)
    assert private in _list(tenant, agent_id="p1")
