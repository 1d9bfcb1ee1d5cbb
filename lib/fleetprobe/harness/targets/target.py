"""A `Target`: an endpoint plus the tenant credential a run uses, and the manifest entry
that records it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fleetprobe.base.labels import default_label
from fleetprobe.client import Credential


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
