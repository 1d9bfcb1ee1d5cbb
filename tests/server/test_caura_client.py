"""Interop: MemClaw's own Python client (`caura-client`, formerly `memclaw-client`, pinned in
the dev extra) drives the reference server over HTTP, every endpoint the client offers. A
wire change that would break MemClaw's own users fails here.

The client's `stats`, `get_document` and `submit_interview` call routes the reference
server does not serve (deployment counters, structured documents, the Interviewer): the test
pins that they fail the way the client maps a missing route (`NotFoundError` from MemClaw's
error envelope), never with a crash or a misparsed success.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

caura_client = pytest.importorskip("caura_client")
from caura_client import Caura, NotFoundError  # noqa: E402

from reference_server.launch.process import ReferenceServer  # noqa: E402

from .conftest import FAST_ARGS  # noqa: E402

PINNED = "1.1.1"


@pytest.fixture(scope="module")
def server() -> Iterator[ReferenceServer]:
    with ReferenceServer(profile="memclaw-2026-05-31", extra_args=FAST_ARGS) as srv:
        yield srv


@pytest.fixture
def client(server: ReferenceServer) -> Iterator[Caura]:
    tenant_id, key = server.create_tenant()
    with Caura(key, tenant_id=tenant_id, base_url=server.base_url, agent_id="interop-agent",
               timeout=10.0) as mc:
        yield mc


def test_the_pinned_client_is_the_one_installed() -> None:
    assert caura_client.__version__ == PINNED


def test_health(client: Caura) -> None:
    assert client.health()["status"] == "ok"


def test_write_search_recall(client: Caura) -> None:
    written = client.write("The staging cluster moved to the eu-north region on Monday.",
                           fleet_id="interop-fleet", metadata={"source": "interop"})
    assert written.id and written.agent_id == "interop-agent"
    assert written.tenant_id == client.tenant_id and written.metadata["source"] == "interop"
    found = client.search("staging cluster region", fleet_ids=["interop-fleet"])
    assert [m.id for m in found] == [written.id]
    assert found[0].similarity is not None and found.raw["items"]
    named = client.search("staging cluster region", filter_agent_id="interop-agent")
    assert [m.id for m in named] == [written.id]
    recalled = client.recall("staging cluster region")
    assert [m.id for m in recalled.supporting_memories] == [written.id]
    assert recalled.summary and "eu-north" in recalled.summary


def test_caller_agent_id_is_accepted(client: Caura) -> None:
    client.write("Interop agents keep their notes private by default here.",
                 fleet_id="interop-fleet")
    result = client.search("interop notes", caller_agent_id="interop-agent")
    assert isinstance(result, list)


def test_a_write_the_server_refuses_raises_the_clients_error(client: Caura) -> None:
    from caura_client import CauraAPIError

    with pytest.raises(CauraAPIError) as refused:
        client.write("too short")
    assert refused.value.status_code == 422


@pytest.mark.parametrize("call", ["stats", "get_document", "submit_interview"])
def test_routes_the_reference_server_does_not_serve(client: Caura, call: str) -> None:
    with pytest.raises(NotFoundError):
        if call == "stats":
            client.stats()
        elif call == "get_document":
            client.get_document("doc-1", collection="notes")
        else:
            client.submit_interview(node_id="n1", agent_id="interop-agent", cursor_from=0,
                                    cursor_to=1, events=[])
