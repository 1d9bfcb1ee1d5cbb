"""A compiled kernel loaded once, on a thread of its own: numba's import and its cached
compilation take a second or more, which no request should wait for. Until it is loaded the
caller takes its numpy path. Used for the int8 search product (vectors.py) and the hashing
embedder's word generator (pipeline/embedding.py); `pipeline/warmup.py` waits for both at
start-up when asked to (`--embed-kernel eager`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")


class BackgroundKernel(Generic[K]):
    def __init__(self, name: str, load: Callable[[], K]) -> None:
        self.name, self._load = name, load
        self._kernel: K | None = None
        self._loading = threading.Lock()
        self._tried = threading.Event()

    def get(self, wait: bool = False) -> K | None:
        """The kernel once loaded, else None; the first ask starts loading it. `wait`:
        until it is loaded or has failed to."""
        if self._kernel is None and self._loading.acquire(blocking=False):
            threading.Thread(target=self._run, name=f"{self.name}-load", daemon=True).start()
        if wait:
            self._tried.wait()
        return self._kernel

    def _run(self) -> None:
        try:
            self._kernel = self._load()
        except Exception:  # the same results, slower: the caller's numpy path
            logging.getLogger(__name__).warning("%s kernel unavailable", self.name,
                                                exc_info=True)
        finally:
            self._tried.set()
