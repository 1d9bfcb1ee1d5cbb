"""Start-up work a first request would otherwise pay (issue 35): done before the server
opens its port, so the launcher's readiness check (`/health`) answers only after it.

`--embed-kernel eager` asks for it: both numba kernels, the hashing embedder's word
generator (wordgen.py) and the int8 search product (storage/int8dots.py), loaded from
numba's cache (compiled once per machine). Left lazy (the default), each loads on a thread
at its first use and the requests meanwhile take numpy's slower path, as before.
"""

from __future__ import annotations

from ..storage.vectors import int8_dots
from .embedding import compiled_kernel


def warm_up(hashing_embedder: bool) -> None:
    """Both kernels, loading side by side on their own threads, waited for."""
    if hashing_embedder:
        compiled_kernel()  # starts its thread; waited for below
    int8_dots(wait=True)
    if hashing_embedder:
        compiled_kernel(wait=True)
