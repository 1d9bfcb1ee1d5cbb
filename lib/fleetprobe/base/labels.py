"""A run's target label from its manifest's target fields: a module of its own, importing
nothing of the kit, so the analysis names old runs without importing the HTTP client."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_EMBEDDER_NAMES = frozenset({None, "hashing", "hashing-sha256"})


def default_label(kind: str | None, profile: str | None, version: str | None,
                  base_url: str | None, embedder: str | None = None) -> str:
    """The bundled server's profile (plus ` +<embedder>` when it is not the default hashing
    embedder, so an embedder ablation is its own label); for a live endpoint
    `live <version> @ <host:port>`."""
    if kind == "backend" and profile:
        return profile
    if kind == "reference" and profile:
        return profile if embedder in DEFAULT_EMBEDDER_NAMES else f"{profile} +{embedder}"
    host = urlsplit(base_url or "").netloc or "unknown-host"
    return f"live {version or 'unknown-version'} @ {host}"
