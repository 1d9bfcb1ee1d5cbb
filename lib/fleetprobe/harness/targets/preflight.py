"""Before a run: reach the endpoint, read its version and prove the credential works, with
an error that says what to change."""

from __future__ import annotations

from fleetprobe.client import MemClawClient
from fleetprobe.harness.targets.params import ENV_KEY, ENV_TENANT, ENV_URL, TargetError
from fleetprobe.harness.targets.target import Target


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
