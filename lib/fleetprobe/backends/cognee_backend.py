"""Cognee (`cognee` 1.6.5) with its access control on (ENABLE_BACKEND_ACCESS_CONTROL): users,
tenants, agent users and dataset permissions are the scoping mechanism. Stores: Cognee's
embedded defaults under the adapter's data directory (SQLite relational database, LanceDB
vectors, Ladybug/Kuzu graph, one vector and graph database per dataset); its LLM and its
embedder are the kit's scripted model on loopback (`FLEETPROBE_MODEL_URL`), so `cognify`
runs its real pipeline offline (docs/backends.md, docs/scripted-model.md).

Identity: a wire tenant is a Cognee tenant created by an owner user (the tenant key acts as
that owner); a wire agent is a Cognee agent user (`cognee.agents.create`, parent = the owner).
A memory is one Cognee data item (`DataItem`, `data_id` = the wire id, the wire's fields in
`external_metadata`) added to a dataset and cognified; search is `cognee.search(CHUNKS)` over
the datasets the request names, and GET / listing read the data rows after Cognee's own
`get_authorized_dataset` check.

Deployments:
- `idiomatic`: a dataset per fleet (and one per tenant for fleet-less rows), created by the
  owner and shared with the whole Cognee tenant (read, write); every agent is added to the
  tenant. Agent-scoped rows sit in their fleet's dataset: Cognee has nothing below a dataset.
- `strict`: the same datasets, shared with no tenant: each agent gets read and write on its
  home fleet's dataset only (what `agents.create(datasets=[...])` grants), agent-scoped rows
  go to a dataset of their own granted to that agent alone, and agents are not tenant members.
Deletes need Cognee's `delete` permission, which only the owner (the tenant key) holds.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from .base import (
    CALLER,
    Change,
    Denied,
    Identity,
    NotSupported,
    SearchScope,
    StoredMemory,
    deployment_of,
)
from .embedder import DIM
from .scripted_model import MODEL_URL_ENV

_GRANTS = ("read", "write")  # what agents.create grants an agent on each dataset


def _configure(data_dir: Path, model_url: str) -> None:
    """Cognee reads its settings from the environment when first imported: every store under
    `data_dir`, the LLM and embedder on the scripted model, telemetry off (TELEMETRY_DISABLED,
    cognee/shared/utils.py), tiktoken's encodings from the copy litellm ships (tiktoken would
    download them otherwise)."""
    litellm = importlib.util.find_spec("litellm")
    tokenizers = Path(litellm.origin).parent / "litellm_core_utils" / "tokenizers" if (
        litellm and litellm.origin) else None
    os.environ.update({
        "ENABLE_BACKEND_ACCESS_CONTROL": "true", "REQUIRE_AUTHENTICATION": "true",
        "TELEMETRY_DISABLED": "1", "COGNEE_SKIP_CONNECTION_TEST": "true",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CACHING": "false",
        "DATA_ROOT_DIRECTORY": str(data_dir / "cognee-data"),
        "SYSTEM_ROOT_DIRECTORY": str(data_dir / "cognee-system"),
        "COGNEE_LOGS_DIR": str(data_dir / "cognee-logs"),
        "LLM_PROVIDER": "openai", "LLM_MODEL": "openai/fleetprobe-scripted",
        "LLM_ENDPOINT": model_url, "LLM_API_KEY": "scripted-model-needs-no-key",
        "EMBEDDING_PROVIDER": "openai_compatible", "EMBEDDING_MODEL": "fleetprobe-scripted",
        "EMBEDDING_ENDPOINT": model_url, "EMBEDDING_API_KEY": "scripted-model-needs-no-key",
        "EMBEDDING_DIMENSIONS": str(DIM),
    })
    if tokenizers is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)


class CogneeBackend:
    name = "cognee"
    package = "cognee"
    store = "SQLite + LanceDB + Ladybug (embedded, per dataset)"
    concurrent = False  # one cognify at a time: its pipelines share the SQLite database

    def __init__(self, data_dir: Path, store: str | None = None,
                 deployment: str | None = None) -> None:
        if store not in (None, "embedded"):
            raise ValueError(f"cognee store {store!r}: use embedded")
        self.deployment = deployment_of(deployment)
        self.strict = self.deployment == "strict"
        model_url = os.environ.get(MODEL_URL_ENV)
        if not model_url:
            raise ValueError(f"cognee needs the scripted model: {MODEL_URL_ENV}")
        _configure(data_dir, model_url)
        # Cognee is async and its engines are bound to one event loop: every call runs there
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True,
                         name="cognee-loop").start()
        self._owners: dict[str, Any] = {}  # wire tenant -> (owner user, Cognee tenant id)
        self._agents: dict[tuple[str, str], Any] = {}  # (tenant, agent) -> agent user
        self._datasets: dict[tuple[str, str], uuid.UUID] = {}  # (tenant, key) -> dataset id
        self._run(self._setup())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _setup(self) -> None:
        import cognee  # noqa: F401  # imported before the adapter reports healthy
        from cognee.modules.engine.operations.setup import setup

        await setup()

    # --- identities and datasets (Cognee's own user, tenant and permission calls) --------

    async def _owner(self, tenant: str) -> tuple[Any, uuid.UUID]:
        if tenant not in self._owners:
            from cognee.modules.users.methods import create_user, get_user
            from cognee.modules.users.tenants.methods import create_tenant

            tag = uuid.uuid5(uuid.NAMESPACE_URL, f"fleetprobe-tenant:{tenant}").hex[:16]
            user = await create_user(email=f"owner-{tag}@fleetprobe.invalid", password=None)
            tenant_id = await create_tenant(f"t-{tag}", user.id)
            self._owners[tenant] = (await get_user(user.id), tenant_id)
        return self._owners[tenant]

    async def _dataset(self, tenant: str, key: str) -> uuid.UUID:
        """The dataset of a fleet (`fleet:F`), an agent (`agent:A`, strict) or the tenant's
        fleet-less rows (`tenant`), created by the owner on first use with its grants."""
        if (tenant, key) not in self._datasets:
            from cognee.modules.data.methods import create_authorized_dataset
            from cognee.modules.users.permissions.methods import (
                get_tenant,
                give_permission_on_dataset,
            )

            owner, tenant_id = await self._owner(tenant)
            name = "ds-" + uuid.uuid5(uuid.NAMESPACE_URL, f"{tenant}\x00{key}").hex[:16]
            dataset = await create_authorized_dataset(name, owner)
            self._datasets[(tenant, key)] = dataset.id
            if not self.strict:  # idiomatic: shared with every member of the tenant
                principal = await get_tenant(tenant_id)
                for grant in _GRANTS:
                    await give_permission_on_dataset(principal, dataset.id, grant)
            else:  # strict: the fleet's own agents (its home fleet) or the agent alone
                for (t, _), agent in list(self._agents.items()):
                    if t == tenant and key in (f"fleet:{agent.fleet}", f"agent:{agent.name}"):
                        for grant in _GRANTS:
                            await give_permission_on_dataset(agent.user, dataset.id, grant)
        return self._datasets[(tenant, key)]

    async def _user(self, caller: Identity) -> Any:
        """The Cognee user a caller acts as: the owner for a tenant key, else its agent user
        (created by the owner with `cognee.agents.create` the first time it is seen)."""
        owner, tenant_id = await self._owner(caller.tenant_id)
        if caller.agent_id is None:
            return owner
        key = (caller.tenant_id, caller.agent_id)
        seen = None
        if key in self._agents and self._agents[key].fleet is None and caller.fleet_id:
            seen = self._agents.pop(key).user  # first seen with no home: grants made now
        if key not in self._agents:
            import cognee
            from cognee.modules.users.methods import get_user
            from cognee.modules.users.permissions.methods import give_permission_on_dataset
            from cognee.modules.users.tenants.methods import add_user_to_tenant

            name = "a-" + uuid.uuid5(uuid.NAMESPACE_URL, caller.agent_id).hex[:16]
            user = seen
            if user is None:
                created = await cognee.agents.create(name, user=owner)
                user = await get_user(uuid.UUID(created["agent_id"]))
            home = caller.fleet_id
            self._agents[key] = _Agent(caller.agent_id, home, user)
            if not self.strict:
                if seen is None:  # a member once
                    await add_user_to_tenant(user.id, tenant_id, owner.id)
            else:  # its home fleet and its own dataset, whenever they exist or are made
                for k in ([f"fleet:{home}"] if home else []) + [
                        f"agent:{caller.agent_id}"]:
                    if (caller.tenant_id, k) in self._datasets:
                        for grant in _GRANTS:
                            await give_permission_on_dataset(
                                user, self._datasets[(caller.tenant_id, k)], grant)
                        continue
                    await self._dataset(caller.tenant_id, k)
            self._agents[key].user = await get_user(user.id)  # with its tenant membership
        return self._agents[key].user

    def _home_key(self, memory: StoredMemory) -> str:
        if self.strict and memory.visibility == "scope_agent" and memory.agent_id:
            return f"agent:{memory.agent_id}"
        return f"fleet:{memory.fleet_id}" if memory.fleet_id else "tenant"

    # --- the wire's operations ----------------------------------------------------------

    def write(self, memory: StoredMemory) -> StoredMemory:
        return self._run(self._write(memory))

    async def _write(self, memory: StoredMemory) -> StoredMemory:
        import cognee
        from cognee.modules.users.exceptions import PermissionDeniedError
        from cognee.tasks.ingestion.data_item import DataItem

        # Cognee checks the principal a request authenticates as: an agent key's agent user,
        # the owner for a tenant key (the body's agent_id is then authorship, kept as data)
        user = await self._user(CALLER.get() or Identity(memory.tenant_id))
        dataset_id = await self._dataset(memory.tenant_id, self._home_key(memory))
        memory.id = str(uuid.uuid4())
        item = DataItem(memory.content, data_id=uuid.UUID(memory.id), literal_text=True,
                        external_metadata={"fleetprobe": memory.payload()})
        try:
            await cognee.add(item, dataset_id=dataset_id, user=user)
            await cognee.cognify(datasets=[dataset_id], user=user)
        except PermissionDeniedError as exc:
            raise Denied(f"Cognee denied the write: {exc}") from exc
        return memory

    def get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        return self._run(self._get(caller, memory_id))

    async def _row(self, caller: Identity, memory_id: str, permission: str = "read"
                   ) -> tuple[Any, Any] | None:
        """The data row and its dataset, if Cognee's `get_authorized_dataset` lets the caller
        at it with `permission` (its datasets API's own check)."""
        from cognee.infrastructure.databases.relational import get_relational_engine
        from cognee.modules.data.methods import get_authorized_dataset
        from cognee.modules.data.models import Data

        try:
            data_id = uuid.UUID(memory_id)
        except ValueError:
            return None
        user = await self._user(caller)
        async with get_relational_engine().get_async_session() as session:
            data = await session.get(Data, data_id)
        if data is None or data.dataset_id is None:
            return None
        try:
            dataset = await get_authorized_dataset(user, data.dataset_id, permission)
        except Exception:  # Cognee raises PermissionDeniedError or returns None  # noqa: BLE001
            return None
        return (data, dataset) if dataset is not None else None

    async def _get(self, caller: Identity, memory_id: str) -> StoredMemory | None:
        found = await self._row(caller, memory_id)
        return _to_wire(found[0]) if found else None

    def _scope_datasets(self, caller: Identity, scope: SearchScope) -> list[uuid.UUID] | None:
        """The datasets a request names (its fleets; strict agents: also their own); None =
        every dataset Cognee lets the caller read (a tenant-wide scope)."""
        if scope.fleet_ids is None:
            return None
        keys = [f"fleet:{f}" for f in scope.fleet_ids]
        if self.strict and caller.agent_id:
            keys.append(f"agent:{caller.agent_id}")
        return [self._datasets[(caller.tenant_id, k)] for k in keys
                if (caller.tenant_id, k) in self._datasets]

    def search(self, caller: Identity, query: str, scope: SearchScope,
               top_k: int) -> list[StoredMemory]:
        return self._run(self._search(caller, query, scope, top_k))

    async def _search(self, caller: Identity, query: str, scope: SearchScope,
                      top_k: int) -> list[StoredMemory]:
        import cognee
        from cognee.infrastructure.databases.relational import get_relational_engine
        from cognee.modules.data.models import Data
        from cognee.modules.search.types import SearchType

        user = await self._user(caller)
        dataset_ids = self._scope_datasets(caller, scope)
        if dataset_ids == []:
            return []
        try:
            results = await cognee.search(query, query_type=SearchType.CHUNKS, user=user,
                                          dataset_ids=dataset_ids, top_k=top_k)
        except Exception as exc:  # noqa: BLE001
            if "ermission" in type(exc).__name__ or "NoData" in type(exc).__name__:
                return []  # Cognee refused the datasets, or they hold nothing searchable
            raise
        out: list[StoredMemory] = []
        async with get_relational_engine().get_async_session() as session:
            for chunk, score in _chunks(results):
                data = await session.get(Data, chunk)
                if data is None:
                    continue
                memory = _to_wire(data, score)
                if self._in_scope(memory, caller, scope) and memory.id not in {
                        m.id for m in out}:
                    out.append(memory)
        return out[:top_k]

    def _in_scope(self, memory: StoredMemory, caller: Identity, scope: SearchScope) -> bool:
        """The author filter, and a strict agent's own dataset read for the named fleets."""
        if scope.author and memory.agent_id != scope.author:
            return False
        return scope.fleet_ids is None or memory.fleet_id in scope.fleet_ids

    def list(self, caller: Identity, scope: SearchScope, limit: int) -> list[StoredMemory]:
        return self._run(self._list(caller, scope, limit))

    async def _list(self, caller: Identity, scope: SearchScope, limit: int
                    ) -> list[StoredMemory]:
        from cognee.modules.data.methods import get_dataset_data
        from cognee.modules.users.permissions.methods import get_all_user_permission_datasets

        user = await self._user(caller)
        readable = {d.id for d in await get_all_user_permission_datasets(user, "read")}
        named = self._scope_datasets(caller, scope)
        out = []
        for dataset_id in sorted(readable if named is None else set(named) & readable,
                                 key=str):
            for data in await get_dataset_data(dataset_id, order_by="created_at"):
                memory = _to_wire(data)
                if self._in_scope(memory, caller, scope):
                    out.append(memory)
        return out[:limit]

    def update(self, caller: Identity, memory_id: str, change: Change
               ) -> StoredMemory | None:
        if change.weight is not None or change.metadata is not None or change.content is None:
            raise NotSupported("Cognee's update replaces a document's content; it has no "
                               "weight or metadata update")
        return self._run(self._update(caller, memory_id, change.content))

    async def _update(self, caller: Identity, memory_id: str, content: str
                      ) -> StoredMemory | None:
        import cognee
        from cognee.modules.data.exceptions import UnauthorizedDataAccessError

        found = await self._row(caller, memory_id, "write")
        if found is None:
            return None
        try:  # Cognee's update asks for write and delete on the dataset
            await cognee.update(data_id=found[0].id, data=content, dataset_id=found[1].id,
                                user=await self._user(caller))
        except UnauthorizedDataAccessError:
            return None
        return await self._get(Identity(caller.tenant_id), memory_id)

    def delete(self, caller: Identity, memory_id: str) -> bool:
        return self._run(self._delete(caller, memory_id))

    async def _delete(self, caller: Identity, memory_id: str) -> bool:
        import cognee

        found = await self._row(caller, memory_id, "delete")
        if found is None:
            return False
        await cognee.datasets.delete_data(found[1].id, found[0].id,
                                          user=await self._user(caller))
        return True

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)


class _Agent:
    def __init__(self, name: str, fleet: str | None, user: Any) -> None:
        self.name, self.fleet, self.user = name, fleet, user


def _chunks(results: Any) -> list[tuple[uuid.UUID, float | None]]:
    """(document id, similarity) of each chunk a CHUNKS search returned, per dataset searched
    (`[{"dataset_id", "search_result": [chunk, ...]}]`), best first across the datasets: a
    chunk's `document_id` is the data item it was cut from, whose id is the wire id. Its
    `score` is LanceDB's cosine distance (lower is closer), so the wire's similarity is
    1 - score."""
    out = []
    for result in results or []:
        items = result.get("search_result") if isinstance(result, dict) else result
        for item in items if isinstance(items, list) else [items]:
            if isinstance(item, dict) and item.get("document_id"):
                score = item.get("score")
                out.append((uuid.UUID(str(item["document_id"])),
                            None if score is None else 1.0 - float(score)))
    return sorted(out, key=lambda pair: -(pair[1] if pair[1] is not None else -2.0))


def _to_wire(data: Any, similarity: float | None = None) -> StoredMemory:
    """The wire fields kept in the row's `external_metadata`, with the content as Cognee
    stores it (the text file `add` wrote; after an `update`, the new text)."""
    meta = data.external_metadata or {}
    if isinstance(meta, str):
        meta = json.loads(meta)
    payload = dict(meta.get("fleetprobe") or {})
    payload["id"] = str(data.id)
    location = str(data.raw_data_location or "").removeprefix("file://")
    if location and Path(location).is_file():
        payload["content"] = Path(location).read_text(encoding="utf-8")
    return StoredMemory.from_payload(payload, similarity=similarity)
