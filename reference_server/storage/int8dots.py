"""`codes @ query` for int8 codes and a float32 query, compiled by numba with the GIL
released: the approximate cosines `vectors.ranked` prefilters with (a quarter of the bytes of
the float32 product, and no BLAS needed). `vectors.int8_dots` imports this module on a thread
of its own at the first search, so a process that never searches never pays numba's import;
the compiled code is cached on disk (`cache=True`)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, fastmath=True, cache=True)
def dots(codes: np.ndarray, query: np.ndarray, out: np.ndarray) -> None:
    for r in range(codes.shape[0]):
        acc = np.float32(0)
        for i in range(codes.shape[1]):
            acc += np.float32(codes[r, i]) * query[i]
        out[r] = acc
