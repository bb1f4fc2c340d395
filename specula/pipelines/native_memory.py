"""Memory the allocators keep after Python freed it, handed back to the system.

A watch's driver frees, at every checkpoint, what a segment held: the buffers of its
Ray connection, Arrow tables, event arrays. Neither allocator gives all of it back by
itself: glibc's ``malloc`` keeps freed chunks in its arenas (a chunk below a live one is
not returned by ``free``), and Arrow's memory pool (mimalloc or jemalloc) keeps freed
pages for its next allocations. The driver's resident memory grew at each checkpoint
although Python held no more objects (docs/measurements.md, "The live watch"), so a
watch calls :func:`release_free_memory` after each checkpoint: ``malloc_trim(0)`` and
the Arrow pool's ``release_unused`` each gave back 5-40 MB there.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library this process runs on
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Give the pages Arrow's memory pool and the C allocator hold free back to the
    system (the pool's ``release_unused``, glibc's ``malloc_trim(0)``); whether the C
    allocator gave any back (False where it has no ``malloc_trim``). It takes a few
    milliseconds: call it after work that freed much, not per event."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
