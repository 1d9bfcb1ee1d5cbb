"""One opener per target kind: the bundled server, a backend adapter or the engine started
(and stopped) for the run, or a live endpoint read from the environment."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from fleetprobe.client import Credential
from fleetprobe.harness.targets.params import (
    ENV_KEY,
    ENV_SHARED_SERVERS,
    ENV_TENANT,
    ENV_URL,
    TargetError,
    TargetParams,
)
from fleetprobe.harness.targets.target import Target


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


def _no_backend() -> TargetError:
    from fleetprobe.backends import BACKENDS

    return TargetError(f"target.kind backend needs target.backend: {', '.join(BACKENDS)} "
                       "(e.g. --set target.backend=mem0, or target.profile=backend-mem0)")


def backend_server(params: TargetParams) -> Any:
    """A `BackendServer` (not started) for the target: its adapter in its locked environment,
    built first if the cache lacks it."""
    backend = params.backend or _backend_of_profile(params.profile)
    if backend is None:
        raise _no_backend()
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
        raise _no_backend()
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
    from fleetprobe.backends import BACKENDS

    profile = profile or ""
    name = profile.removeprefix("backend-")
    return name if profile.startswith("backend-") and name in BACKENDS else None


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
