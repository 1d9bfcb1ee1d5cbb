"""Where a run sends its requests: the bundled reference server, or a live endpoint.

`reference`: starts `reference_server` on a free loopback port with the params' profile,
creates a fresh tenant for the run, stops the server afterwards.
`backend`: starts the adapter of another memory system (`target.backend`: one of
`fleetprobe.backends.BACKENDS`; docs/backends.md) the same way, with a fresh tenant.
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

from fleetprobe.base.labels import DEFAULT_EMBEDDER_NAMES, default_label  # noqa: F401 - re-exported

from .openers import (  # noqa: F401 - the package's face
    backend_label,
    backend_server,
    backend_target,
    engine_target,
    live_target,
    open_target,
    reference_target,
    server_launch,
    target_for_server,
)
from .params import (  # noqa: F401 - the package's face
    AUTH_TEXT,
    DEFAULT_PROFILE,
    ENV_KEY,
    ENV_SHARED_SERVERS,
    ENV_TENANT,
    ENV_URL,
    LABEL_PATTERN,
    LiveAuth,
    TargetError,
    TargetParams,
)
from .preflight import (  # noqa: F401 - the package's face
    credential_hint,
    preflight,
)
from .target import (  # noqa: F401 - the package's face
    Target,
)



