"""Memory the allocators keep after Python freed it, handed back to the system.

A watch's driver frees, at every checkpoint, what a segment held: the buffers of its
Ray connection, Arrow tables, event arrays. Neither allocator gives all of it back by
itself: glibc's ``malloc`` keeps freed chunks in its arenas (a chunk below a live one is
not returned by ``free``), and Arrow's memory pool (mimalloc or jemalloc) keeps freed
pages for its next allocations. The driver's resident memory grew at each checkpoint
although Python held no more objects (docs/measurements.md, "The live watch"), so a
watch calls :func:`release_free_memory` after each checkpoint: ``malloc_trim(0)`` and
the Arrow pool's ``release_unused`` each gave back 5-40 MB there.

That was not all of it: glibc moves its mmap threshold up to the size of each large
block freed (up to 32 MB; the trim threshold to twice that), so after the first event
arrays of a segment were freed, blocks of up to that size came from the arenas, and the
free space at the top of a thread's arena stays resident (``malloc_trim`` trims only
the main arena's top). The driver's arenas grew by ~10 MB a segment, nearly all of it
free. A watch therefore fixes both thresholds at glibc's starting values
(:func:`fix_malloc_thresholds`, as ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_`` would): large blocks are mapped and unmapped whole.

Nor is Arrow's pool (mimalloc) on the driver's threads: ``release_unused`` on the main
thread gave back less of what buffers made on another thread and freed on the main
thread held (400 buffers of 1.6 MB: 676 MB resident, 26 MB after it; 2 MB when one
thread made and freed them), and in a watch mimalloc's 1 GiB reservation grew from 19 to
58 MB resident over 8 minutes with nothing allocated in it at the checkpoints. Routing
pyarrow's functions to ``malloc`` left Arrow's own code (the Parquet readers and writers
of each checkpoint's compaction) on mimalloc, whose reservation still grew 14 → 44 MB
over 5 minutes and was most of the driver's growth. Arrow picks its default pool once,
from ``ARROW_DEFAULT_MEMORY_POOL``, when pyarrow is first imported: a watch sets it to
``system`` before (:func:`steady_allocators`), so all of Arrow allocates from ``malloc``
(the processes the watch starts inherit it).

Bounding glibc's arenas (``mallopt(M_ARENA_MAX, 1)``, which gathers the chunks of the
driver's threads in one arena) was tried beside these and taken back: the driver's
memory grew as much with it while Arrow still used mimalloc, and stayed as level
without it once Arrow no longer did (docs/measurements.md, "The live watch").
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable
from typing import Any

#: glibc's starting mmap and trim thresholds, kept by :func:`fix_malloc_thresholds`.
MALLOC_THRESHOLD = 128 * 2**10
#: What Arrow reads, when pyarrow is imported, for its default memory pool.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
# mallopt's parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library this process runs on, where it is glibc (Linux); else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim, libc.mallopt  # noqa: B018 (glibc's; other C libraries may lack them)
    except (OSError, AttributeError):
        return None
    return libc


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    libc = _libc()
    if libc is None:
        return None
    trim = libc.malloc_trim
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def _arrow_pools() -> list[Any]:
    """Arrow's default pool and its built-in ones (mimalloc, jemalloc: those this
    pyarrow has): Arrow's own code allocates from the built-in default whichever pool
    pyarrow's functions were given (:func:`steady_allocators`)."""
    import pyarrow as pa

    pools = [pa.default_memory_pool()]
    for make in (pa.mimalloc_memory_pool, pa.jemalloc_memory_pool):
        try:
            pools.append(make())
        except NotImplementedError:  # not built into this pyarrow
            continue
    return pools


def release_free_memory() -> bool:
    """Give the pages Arrow's memory pool and the C allocator hold free back to the
    system (the pool's ``release_unused``, glibc's ``malloc_trim(0)``); whether the C
    allocator gave any back (False where it has no ``malloc_trim``). It takes a few
    milliseconds: call it after work that freed much, not per event."""
    for pool in _arrow_pools():
        pool.release_unused()
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


def steady_allocators() -> bool:
    """Set a long-lived process's allocators up to give back what it frees (see the
    module): glibc's thresholds fixed (:func:`fix_malloc_thresholds`) and Arrow on
    ``malloc`` (:func:`arrow_on_malloc`). Whether both were set. Call it once, at the
    start, before pyarrow is imported."""
    arrow = arrow_on_malloc()
    return fix_malloc_thresholds() and arrow


def arrow_on_malloc() -> bool:
    """Make ``malloc`` Arrow's default memory pool, for Arrow's own code too where
    pyarrow is not imported yet (``ARROW_DEFAULT_MEMORY_POOL``, read at its import);
    where it is, only for the allocations made through pyarrow's functions
    (``pyarrow.set_memory_pool``). Whether all of Arrow's were set."""
    os.environ[ARROW_POOL_ENV] = "system"
    if "pyarrow" not in sys.modules:
        return True
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return False


def _mallopt(parameter: int, value: int) -> bool:
    """glibc's ``mallopt(parameter, value)``: whether it was set (False where the C
    library is not glibc)."""
    libc = _libc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(parameter, value))


def fix_malloc_thresholds(threshold: int = MALLOC_THRESHOLD) -> bool:
    """Fix glibc's mmap and trim thresholds at ``threshold`` bytes for the rest of the
    process (``mallopt``), which turns off their moving up with the blocks freed (see
    the module): blocks of at least ``threshold`` are mapped apart and unmapped when
    freed, and an arena's free top above it goes back at once. Whether both were set
    (False where the C library is not glibc). A long-lived process calls it once, at
    its start; a block mapped apart costs a system call, the event arrays it applies
    to are hundreds of kilobytes and more."""
    return _mallopt(_M_MMAP_THRESHOLD, threshold) and _mallopt(_M_TRIM_THRESHOLD, threshold)
