"""Where a run sends its requests: the bundled reference server, or a live endpoint.

`reference`: starts `reference_server` on a free loopback port with the params' profile,
creates a fresh tenant for the run, stops the server afterwards.
`backend`: starts the adapter of another memory system (`target.backend`: langgraph, mem0,
crewai; `lib/fleetprobe/backends`, docs/backends.md) the same way, with a fresh tenant.
`engine`: MemClaw's open-source engine, built and started by the kit from a checkout or
source archive (`target.engine_src` or FLEETPROBE_ENGINE_SRC; `lib/fleetprobe/engine`,
docs/engine.md): the instance `fleetprobe engine up` started when it matches, else a private
one stopped after the run; a fresh tenant id per run, identity by headers (or a gate key).
`live`: base URL, key and tenant from the environment (`MEMCLAW_API_URL`, `MEMCLAW_API_KEY`,
`MEMCLAW_TENANT_ID`), never from a file. The harness has no delete call at all, so a live
run cannot remove data it did not write.

`target.auth` names the credential shape of a live endpoint (see `Credential`):
- `key`: a managed gateway (memclaw.net, MemClaw's on-prem gateway). `MEMCLAW_API_KEY` is a
  tenant key; agent identities come from self-provisioned agent keys.
- `gate`: a self-hosted engine with a shared gate key. `MEMCLAW_API_KEY` is the gate key,
  sent as `X-API-Key` with `X-Tenant-ID`; agent identities are asserted in `X-Agent-ID`.
- `headers`: a self-hosted engine without a gate key: `X-Tenant-ID` / `X-Agent-ID` only,
  `MEMCLAW_API_KEY` is not used.

Every run has a target label (`target.label`), the name the report judges and keeps apart:
for the bundled server its profile, for a live endpoint what its `/version` and URL say
(`default_label`), unless the params set one.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleetprobe.client import Credential, MemClawClient
from fleetprobe.labels import DEFAULT_EMBEDDER_NAMES, default_label  # noqa: F401 - re-exported

ENV_URL = "MEMCLAW_API_URL"
ENV_KEY = "MEMCLAW_API_KEY"
ENV_TENANT = "MEMCLAW_TENANT_ID"
DEFAULT_PROFILE = "memclaw-2026-05-30"
# Set by `fleetprobe reproduce --fast`: servers already running, keyed by the target params
# they serve, that runs share (each in a fresh tenant) instead of starting their own.
ENV_SHARED_SERVERS = "FLEETPROBE_SHARED_SERVERS"
LiveAuth = Literal["key", "gate", "headers"]
AUTH_TEXT: dict[str, str] = {
    "key": "managed gateway: tenant key in X-API-Key, agent keys self-provisioned",
    "gate": "self-hosted engine: shared gate key in X-API-Key + X-Tenant-ID + asserted "
            "X-Agent-ID",
    "headers": "self-hosted engine without a gate key: X-Tenant-ID + asserted X-Agent-ID",
}
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:@/+-]{0,79}$")


class TargetError(RuntimeError):
    """The target cannot be used; the message says what is wrong and what to do."""


class TargetParams(BaseModel):
    """The `target:` block of a params file."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["reference", "live", "backend", "engine"] = "reference"
    # reference only (the bundled server's profile); None = DEFAULT_PROFILE for `reference`;
    # a batch plan names backends as profiles (`backend-mem0`)
    profile: str | None = None
    # backend only: which memory system, and which of its stores (langgraph: memory | sqlite)
    backend: Literal["langgraph", "mem0", "crewai"] | None = None
    backend_store: str | None = None
    # backend only: its locked environment (lib/fleetprobe/backends/locks/<env>.in; default the
    # backend's own) and how wire scopes map onto its own (idiomatic | strict; docs/backends.md)
    backend_env: str | None = None
    backend_deployment: str | None = None
    # engine only: the engine's source (a checkout or .tar.gz); None = FLEETPROBE_ENGINE_SRC
    engine_src: str | None = None
    # reference and engine: the server's rate limits (e.g. "10/second"); for the engine
    # RATE_LIMIT_WRITE / _SEARCH / _WRITE_BULK, raised by default (fleetprobe.engine.services)
    write_rate: str | None = None
    search_rate: str | None = None
    bulk_rate: str | None = None
    # reference only: the server's embedder (`hashing` default; `minilm` needs the embed extra)
    embedder: Literal["hashing", "minilm"] | None = None
    # the credential shape (module docstring); for `reference` the bundled server is started
    # demanding that shape (`key` = its gateway keys)
    auth: LiveAuth = "key"
    # reference only (scale runs): the server's storage, `sqlite` (a file) or `postgres` (a
    # fresh database on an embedded PostgreSQL + pgvector: the `pg` extra), and background
    # memories written into the run's tenant through the storage layer before the run
    # (reference_server/pipeline/background.py), so the run meets a production-sized store
    storage: Literal["sqlite", "postgres"] = "sqlite"
    background_memories: int = Field(0, ge=0)
    vector_search: Literal["exact", "hnsw"] = "exact"  # postgres: exact ranking or HNSW
    # the name the report judges this run under; None = default_label()
    label: str | None = None

    @model_validator(mode="after")
    def _profile_for_reference_only(self) -> TargetParams:
        if self.kind in ("live", "engine") and self.embedder is not None:
            raise ValueError("embedder selects the bundled server's embedder; a live "
                             "endpoint embeds as it is configured")
        if self.kind == "engine":
            if "auth" not in self.model_fields_set:
                self.auth = "headers"  # the engine has no gateway keys: headers by default
            if self.auth == "key":
                raise ValueError("the engine has no gateway keys: target.auth headers or gate")
        if self.kind in ("live", "engine"):
            # a profile selects the bundled server's behaviour: a params file written for it
            # can be pointed at a live endpoint (`--set target.kind=live`) without it reaching
            # the manifest; a live target's name in the report is target.label
            self.profile = None
        if self.kind == "reference" and self.profile is None:
            self.profile = DEFAULT_PROFILE
        if self.kind == "reference":
            _check_known_profile(self.profile)
        if self.label is not None and not LABEL_PATTERN.match(self.label):
            raise ValueError("label: 1-80 characters, letters, digits and ' ._:@/+-'")
        return self


def _check_known_profile(profile: str) -> None:
    """A profile the bundled server does not have fails here, in one line, before any server
    starts."""
    try:
        from reference_server.governance.profiles import PROFILES
    except ImportError:
        return
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; the bundled server has "
                         f"{', '.join(sorted(PROFILES))}")


@dataclass
class Target:
    """An endpoint plus the tenant credential a run uses; `info` is filled by `preflight`."""

    kind: str
    base_url: str
    tenant: Credential
    profile_requested: str | None = None
    secrets: frozenset[str] = frozenset()
    info: dict[str, Any] = field(default_factory=dict)
    server: Any = None  # the ReferenceServer when kind == "reference"
    label_requested: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # kind-specific manifest fields

    @property
    def label(self) -> str:
        return self.label_requested or default_label(
            self.kind, self.info.get("profile") or self.profile_requested,
            _text(self.info.get("version")), self.base_url, self.info.get("embedder"))

    @property
    def identity_mechanism(self) -> str:
        """How agent identities are had: `provisioned` agent keys or `asserted` headers."""
        return "asserted" if self.tenant.asserts_identity else "provisioned"

    def extra_tenant(self) -> Credential | None:
        """A further fresh tenant on the same endpoint, where the target can make one (the
        bundled server); None for a live target, which has the one tenant it was given."""
        if self.server is None or not hasattr(self.server, "create_tenant"):
            return None
        tenant_id, raw_key = self.server.create_tenant()
        if self.kind == "engine":  # asserted identity: the same credential shape, another id
            return replace(self.tenant, tenant_id=tenant_id)
        self.secrets = self.secrets | {raw_key}
        return Credential(kind="tenant", tenant_id=tenant_id, key=raw_key)
    storage: str | None = None  # reference: sqlite / postgres
    background_memories: int = 0

    def manifest_entry(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "base_url": self.base_url,
            "tenant_id": self.tenant.tenant_id,
            "auth": self.tenant.kind,
            "identity_mechanism": self.identity_mechanism,
            "server_version": self.info.get("version"),
            # what the endpoint's /version says; a live MemClaw names no profile (null)
            "server_profile": self.info.get("profile"),
            "latency_simulated": self.info.get("latency_simulated"),
            "server_shared": bool(getattr(self.server, "shared", False)),
            "embedder": self.info.get("embedder"),
            **({"backend": self.info.get("backend"),
                "backend_version": self.info.get("backend_version"),
                "backend_store": self.info.get("backend_store"),
                "backend_env": self.info.get("backend_env"),
                "backend_deployment": self.info.get("backend_deployment"),
                "outbound_refused": (self.info.get("network") or {}).get("outbound_refused")}
               if self.kind == "backend" else {}),
            **({"storage": self.storage, "background_memories": self.background_memories}
               if self.storage else {}),
            **self.details,
        }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@contextmanager
def open_target(params: TargetParams) -> Iterator[Target]:
    if params.kind == "reference":
        with reference_target(params) as target:
            yield target
    elif params.kind == "backend":
        with backend_target(params) as target:
            yield target
    elif params.kind == "engine":
        with engine_target(params) as target:
            yield target
    else:
        yield live_target(params)


def server_launch(params: TargetParams) -> dict[str, Any]:
    """How a bundled server must be started to serve `params` (ReferenceServer's arguments):
    its profile, its options and the credential shape it demands."""
    extra: list[str] = []
    if params.write_rate:
        extra += ["--write-rate", params.write_rate]
    if params.search_rate:
        extra += ["--search-rate", params.search_rate]
    if params.bulk_rate:
        extra += ["--bulk-rate", params.bulk_rate]
    if params.embedder:
        extra += ["--embedder", params.embedder]
    db_url = None
    if params.storage == "postgres":
        extra += ["--vector-search", params.vector_search]
        from reference_server.launch.embedded_pg import shared_database_url

        db_url = shared_database_url()
    return {"profile": params.profile, "extra_args": tuple(extra), "db_url": db_url,
            "auth": "gateway" if params.auth == "key" else params.auth}


@contextmanager
def reference_target(params: TargetParams) -> Iterator[Target]:
    shared = json.loads(os.environ.get(ENV_SHARED_SERVERS) or "{}").get(
        params.model_dump_json())
    try:
        from reference_server.launch.process import (
            ReferenceServer,
            ReferenceServerError,
            RunningServer,
        )
    except ImportError as exc:
        raise TargetError(
            f"the bundled reference server is not importable ({exc}); install the kit with "
            "`pip install -e .` or use a live target"
        ) from exc
    if shared:
        running = RunningServer(shared["base_url"], shared["admin_key"], params.profile,
                                auth=shared.get("auth", "gateway"),
                                gate_key=shared.get("gate_key"))
        try:
            target = target_for_server(running, params.profile, label=params.label)
        except (ReferenceServerError, OSError) as exc:
            raise TargetError(f"the shared server at {running.base_url}: {exc}") from exc
        yield target
        return
    try:
        server = ReferenceServer(**server_launch(params)).start()
    except ReferenceServerError as exc:
        raise TargetError(str(exc)) from exc
    with server:
        target = target_for_server(server, params.profile, label=params.label)
        target.storage = (f"postgres ({params.vector_search})" if server.db_url
                          else "sqlite")
        if params.background_memories:  # a production-sized store before the run
            from reference_server.pipeline.background import seed_background

            seed_background(server.db_url or server.db_path, target.tenant.tenant_id,
                            params.background_memories)
            target.background_memories = params.background_memories
        yield target


def backend_server(params: TargetParams) -> Any:
    """A `BackendServer` (not started) for the target: its adapter in its locked environment,
    built first if the cache lacks it."""
    backend = params.backend or _backend_of_profile(params.profile)
    if backend is None:
        raise TargetError("target.kind backend needs target.backend: langgraph, mem0 or crewai "
                          "(e.g. --set target.backend=mem0, or target.profile=backend-mem0)")
    from fleetprobe.backends.process import BackendServer

    try:
        return BackendServer(backend, params.backend_store, backend_env=params.backend_env,
                             deployment=params.backend_deployment)
    except Exception as exc:  # the locked environment could not be built
        raise TargetError(f"the {backend} adapter's environment is not available: {exc}"
                          ) from exc


@contextmanager
def backend_target(params: TargetParams) -> Iterator[Target]:
    backend = params.backend or _backend_of_profile(params.profile)
    if backend is None:
        raise TargetError("target.kind backend needs target.backend: langgraph, mem0 or crewai "
                          "(e.g. --set target.backend=mem0, or target.profile=backend-mem0)")
    from reference_server.launch.process import RunningServer

    shared = json.loads(os.environ.get(ENV_SHARED_SERVERS) or "{}").get(
        params.model_dump_json())
    if shared:  # an adapter another process started (the smoke tests share one per backend)
        running = RunningServer(shared["base_url"], shared["admin_key"], f"backend-{backend}")
        yield target_for_server(running, f"backend-{backend}", backend_label(params, backend),
                                kind="backend")
        return
    server = backend_server(params)
    try:
        server.start()
    except Exception as exc:
        server.close()
        raise TargetError(f"the {backend} adapter did not start: {exc}") from exc
    try:
        yield target_for_server(server, f"backend-{backend}", backend_label(params, backend),
                                kind="backend")
    finally:
        server.close()


@contextmanager
def engine_target(params: TargetParams) -> Iterator[Target]:
    """MemClaw's engine (fleetprobe.engine.instance.engine_for_run), a fresh tenant id."""
    from fleetprobe.engine import EngineError, engine_for_run

    rates = {"write": params.write_rate, "search": params.search_rate,
             "write_bulk": params.bulk_rate}
    with ExitStack() as stack:
        try:
            engine = stack.enter_context(engine_for_run(
                params.engine_src, params.auth, {k: v for k, v in rates.items() if v}))
        except EngineError as exc:
            raise TargetError(str(exc)) from exc
        state = engine.state
        tenant_id, _ = engine.create_tenant()
        cred = Credential(kind=params.auth, tenant_id=tenant_id, key=engine.gate_key)
        yield Target(
            kind="engine", base_url=state.base_url, tenant=cred, server=engine,
            secrets=frozenset({engine.gate_key} if engine.gate_key else ()),
            label_requested=params.label or f"engine {state.version} @ {state.commit[:7]}",
            details={"engine": {**state.manifest(), "shared": engine.shared}})


def backend_label(params: TargetParams, backend: str) -> str:
    """`backend-<name>[<deployment>,<store>,<env>]`, store and environment when not the
    default, e.g. `backend-langgraph[strict,sqlite,langgraph-ckpt-3.1.0]`: the report keeps each
    apart, and from the committed runs labelled `backend-<name>` (the mapping before
    deployments were named)."""
    if params.label:
        return params.label
    parts = [params.backend_deployment or "idiomatic", params.backend_store,
             params.backend_env if params.backend_env not in (None, backend) else None]
    return f"backend-{backend}[{','.join(p for p in parts if p)}]"


def _backend_of_profile(profile: str | None) -> str | None:
    """`backend-mem0` -> `mem0`: a batch plan names backends as profiles (params/backends.yaml)."""
    profile = profile or ""
    name = profile.removeprefix("backend-")
    return name if profile.startswith("backend-") and name in ("langgraph", "mem0", "crewai") \
        else None


def target_for_server(server: Any, profile: str | None = None,
                      label: str | None = None, kind: str = "reference") -> Target:
    """A target on an already running ReferenceServer (or backend adapter), with a fresh
    tenant. A server started with `auth="gate"` or `"headers"` is spoken to in that shape."""
    tenant_id, raw_key = server.create_tenant()
    auth = getattr(server, "auth", "gateway")
    if auth == "gate":
        cred = Credential(kind="gate", tenant_id=tenant_id, key=server.gate_key)
    elif auth == "headers":
        cred = Credential(kind="headers", tenant_id=tenant_id)
    else:
        cred = Credential(kind="tenant", tenant_id=tenant_id, key=raw_key)
    return Target(
        kind=kind,
        base_url=server.base_url,
        tenant=cred,
        profile_requested=profile,
        secrets=frozenset(s for s in (raw_key, server.admin_key,
                                      getattr(server, "gate_key", None)) if s),
        server=server,
        label_requested=label,
    )


def live_target(params: TargetParams, env: dict[str, str] | None = None) -> Target:
    env = dict(os.environ if env is None else env)
    keyed = params.auth in ("key", "gate")
    needed = [ENV_URL, ENV_TENANT] + ([ENV_KEY] if keyed else [])
    missing = [name for name in needed if not env.get(name)]
    if missing:
        what = {"key": ", tenant API key", "gate": ", the engine's gate key"}.get(params.auth, "")
        raise TargetError(
            f"live target (auth: {params.auth}) needs the environment variable(s) "
            f"{', '.join(missing)} (base URL, tenant id{what}); export them in your shell, "
            "never put them in a params file"
        )
    tenant_id = env[ENV_TENANT]
    if params.auth == "key":
        cred = Credential(kind="tenant", tenant_id=tenant_id, key=env[ENV_KEY])
    elif params.auth == "gate":
        cred = Credential(kind="gate", tenant_id=tenant_id, key=env[ENV_KEY])
    else:
        cred = Credential(kind="headers", tenant_id=tenant_id)
    return Target(
        kind="live",
        base_url=env[ENV_URL].rstrip("/"),
        tenant=cred,
        secrets=frozenset({cred.key} if cred.key else ()),
        label_requested=params.label,
    )


def credential_hint(auth: str, status: int | None, error: str | None) -> str:
    """What to change when a live endpoint refuses the credential, read from its answer."""
    message = (error or "").lower()
    if "include x-api-key" in message:  # the engine has a gate key and got none
        return (f"the endpoint demands X-API-Key: a self-hosted engine with a gate key wants "
                f"`target.auth: gate` with the gate key in {ENV_KEY}; a managed gateway wants "
                f"`target.auth: key` with a tenant key in {ENV_KEY}")
    if "x-tenant-id header" in message:  # header-trust engine, no tenant header sent
        return ("the endpoint reads the tenant from X-Tenant-ID: use `target.auth: headers` "
                "(no key) or `target.auth: gate` (with its gate key)")
    if status == 403 and "not authorized" in message and auth == "key":
        return (f"the key is valid but not for tenant {ENV_TENANT}: if it is a self-hosted "
                f"engine's shared gate key, use `target.auth: gate` (sends X-Tenant-ID); "
                f"else check {ENV_TENANT}")
    if auth == "headers":
        return (f"check {ENV_TENANT}; an endpoint that wants a key needs `target.auth: gate` "
                "or `key`")
    return f"check {ENV_KEY} (auth: {auth}) and {ENV_TENANT}"


async def preflight(client: MemClawClient, target: Target) -> None:
    """Reach the endpoint, read its version, and prove the credential works.

    Raises TargetError naming the problem: unreachable, wrong key, unexpected shape.
    """
    version = await client.version()
    if version.status is None:
        raise TargetError(
            f"cannot reach {target.base_url} ({version.error}); is the server running and "
            f"is the URL right{' (' + ENV_URL + ')' if target.kind == 'live' else ''}?"
        )
    if version.ok and not isinstance(version.body, dict):
        raise TargetError(
            f"GET /api/v1/version at {target.base_url} answered an unexpected shape "
            f"({version.error or type(version.body).__name__}); is this a MemClaw endpoint?"
        )
    target.info = dict(version.body) if version.ok else {}
    served = target.info.get("profile")
    if target.profile_requested and served != target.profile_requested:
        raise TargetError(
            f"{target.base_url} serves profile {served!r}, not the requested "
            f"{target.profile_requested!r}"
        )
    probe = await client.list_memories(target.tenant, limit=1)
    if probe.status in (401, 403):
        auth = {"tenant": "key"}.get(target.tenant.kind, target.tenant.kind)
        hint = (credential_hint(auth, probe.status, probe.error) if target.kind == "live"
                else f"the reference server's {target.tenant.kind} credential")
        raise TargetError(
            f"{target.base_url} rejected the credential for tenant "
            f"{target.tenant.tenant_id!r} ({probe.error}); {hint}"
        )
    if probe.status is None:
        raise TargetError(f"{target.base_url} stopped answering ({probe.error})")
    if probe.ok and not (isinstance(probe.body, dict) and "items" in probe.body):
        raise TargetError(
            f"GET /api/v1/memories at {target.base_url} answered an unexpected shape; "
            "is this a MemClaw-compatible endpoint?"
        )
