"""Memory the C allocator keeps after Python freed it, handed back to the system.

A watch's driver frees, at every checkpoint, what a segment held: the buffers of its
Ray connection, Arrow tables, event arrays. glibc's ``malloc`` keeps freed chunks in
its arenas, and a chunk below a live one is not given back by ``free``: the driver's
resident memory grew in steps of ~30 MB at each checkpoint although Python held no more
objects (tracemalloc saw tens of KB; docs/measurements.md, "The live watch").
``malloc_trim(0)`` returns the free pages of every arena to the system, so a watch
calls :func:`release_free_memory` after each checkpoint.
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
    """Give the pages the C allocator holds free back to the system (glibc's
    ``malloc_trim(0)``); whether any were given back. Elsewhere nothing happens (False).
    It takes a few milliseconds: call it after work that freed much, not per event."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
