"""Cognee's own access control on the wire (its adapter on loopback, cognify on the scripted
model): under `strict`, an agent with no permission on a fleet's dataset gets none of its
rows by search, GET or listing, and its write there is refused 403 by Cognee; the fleet's
own agents and the tenant key (the datasets' owner) read them. Under `idiomatic` every
dataset is shared with the Cognee tenant, so the other fleet's agent reads them too."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from fleetprobe.backends.process import BackendServer

from .test_deployments import Wire

pytestmark = pytest.mark.backends
SECRET = "Kestrel vault passphrase is amber lantern"


def _listed(w: Wire, headers: dict[str, str], fleet: str) -> list[str]:
    r = httpx.get(w.url + "/memories", headers=headers, timeout=60,
                  params={"tenant_id": w.tenant_id, "fleet_id": fleet})
    assert r.status_code == 200, r.text
    return [item["id"] for item in r.json()["items"]]


@pytest.mark.parametrize("deployment", ["strict", "idiomatic"])
def test_dataset_permissions_scope_reads_and_writes(
        deployment: str, backend_server: Callable[..., BackendServer]) -> None:
    server = backend_server("cognee", None if deployment == "idiomatic" else deployment)
    w = Wire(server)
    owner, mate, other = w.agent("owner", "f1"), w.agent("mate", "f1"), w.agent("other", "f2")
    written = w.write(owner, content=SECRET, fleet_id="f1", visibility="scope_team")
    assert written.status_code == 201, written.text
    mid = written.json()["id"]
    shared = deployment == "idiomatic"
    assert mid in w.search(mate, SECRET, fleet_ids=["f1"])  # the fleet's own agents read it
    assert mid in w.search(w.tenant, SECRET)  # the tenant key owns every dataset
    assert (mid in w.search(other, SECRET, fleet_ids=["f1"])) is shared
    assert (w.get(other, mid).status_code == 200) is shared
    assert (mid in _listed(w, other, "f1")) is shared
    assert w.get(mate, mid).json()["content"] == SECRET
    intruder = w.write(other, content="Other fleet note on the kestrel vault", fleet_id="f1")
    if shared:
        assert intruder.status_code == 201, intruder.text
    else:  # Cognee's own check: the agent holds no write permission on f1's dataset
        assert intruder.status_code == 403, intruder.text
        assert "cognee denied" in intruder.json()["error"]["message"].lower()
    version = httpx.get(w.url + "/version", timeout=30).json()
    assert version["backend"] == "cognee" and version["backend_deployment"] == deployment
    assert version["network"]["outbound_refused"] == 0
