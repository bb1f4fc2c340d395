"""A watch hands the memory its driver freed back to the system at each checkpoint
(glibc keeps freed chunks below a live one in its arenas)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from specula.pipelines import native_memory, replay, spark_stream, watch_checkpoint


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(native_memory._malloc_trim() is None, reason="no malloc_trim (not glibc)")
def test_memory_freed_below_a_live_chunk_goes_back_to_the_system():
    chunks = [bytearray(4000) for _ in range(40_000)]  # ~160 MB of malloc'd chunks
    for chunk in chunks:
        chunk[::512] = b"x" * len(chunk[::512])  # touched: resident
    last = chunks.pop()  # kept: free() alone cannot shrink the heap below it
    chunks.clear()
    before = _rss_mb()
    assert native_memory.release_free_memory()
    assert before - _rss_mb() > 50, "malloc_trim gave back less than a third of 160 MB"
    del last


_FIXED_THRESHOLDS = """
import ctypes
from specula.pipelines import native_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = native_memory._libc()
libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
libc.mallinfo2.restype = MallInfo2
assert native_memory.fix_malloc_thresholds()
# freeing a mapped 16 MB block moves glibc's own threshold up to 16 MB; a fixed one
# stays, so the 4 MB block below is mapped apart, not carved from an arena
libc.free(libc.malloc(16 * 2**20))
mapped = libc.mallinfo2().hblkhd
block = libc.malloc(4 * 2**20)
assert libc.mallinfo2().hblkhd - mapped >= 4 * 2**20, "the 4 MB block came from an arena"
libc.free(block)
"""


@pytest.mark.skipif(native_memory._libc() is None, reason="not glibc")
def test_fixed_thresholds_map_large_blocks_apart_after_a_larger_one_was_freed():
    """In a fresh interpreter: a process that ran other tests may hold a free chunk
    large enough for the block in an arena, and the thresholds are process-wide."""
    done = subprocess.run([sys.executable, "-c", _FIXED_THRESHOLDS], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


_ARROW_ON_MALLOC = """
import specula.cli, specula.cluster.spark, specula.pipelines.delays
import specula.pipelines.log_files, specula.pipelines.replay
from specula.pipelines import native_memory

# a watch sets its allocators up after these imports: pyarrow is not among them
assert native_memory.steady_allocators()
import pyarrow as pa, pyarrow.parquet as pq

assert pa.default_memory_pool().backend_name == "system"
table = pa.table({"x": list(range(200_000)), "y": [str(i) for i in range(200_000)]})
# Arrow's own code: its Parquet writer and reader, on a buffer Arrow allocated. Not on
# Python bytes: the reader's threads drop their last hold on its input after
# read_table returns, and the one that releases Python bytes takes the GIL, which in
# the interpreter's teardown ends the thread inside a C++ destructor: an abort at exit
# ("terminate called without an active exception") in 2-12 % of runs
sink = pa.BufferOutputStream()
pq.write_table(table, sink)
assert pq.read_table(pa.BufferReader(sink.getvalue())).equals(table)
assert pa.mimalloc_memory_pool().max_memory() == 0, "Arrow's code used mimalloc"
"""


def test_steady_allocators_put_all_of_arrow_on_malloc():
    """In a fresh interpreter (Arrow reads its default pool once, at pyarrow's import;
    glibc's settings are process-wide): after the modules a watch has imported by then,
    Arrow's own code (Parquet's writer and reader) takes nothing from mimalloc."""
    done = subprocess.run([sys.executable, "-c", _ARROW_ON_MALLOC], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_arrow_imported_already_gets_its_functions_on_malloc(monkeypatch):
    import pyarrow as pa

    monkeypatch.setenv(native_memory.ARROW_POOL_ENV, "mimalloc")
    before = pa.default_memory_pool()
    try:
        assert native_memory.arrow_on_malloc() is False  # pyarrow's own code: too late
        assert pa.default_memory_pool().backend_name == "system"
        table = pa.table({"x": list(range(100_000))})
        assert pa.system_memory_pool().bytes_allocated() >= table.nbytes
    finally:
        pa.set_memory_pool(before)


def test_without_malloc_trim_only_arrows_pools_are_released(monkeypatch):
    import pyarrow as pa

    released: list[str] = []

    def pool(name):
        return lambda: SimpleNamespace(release_unused=lambda: released.append(name))

    def unbuilt():
        raise NotImplementedError("not built")

    monkeypatch.setattr(pa, "default_memory_pool", pool("default"))
    monkeypatch.setattr(pa, "mimalloc_memory_pool", pool("mimalloc"))
    monkeypatch.setattr(pa, "jemalloc_memory_pool", unbuilt)
    monkeypatch.setattr(native_memory, "_malloc_trim", lambda: None)
    assert native_memory.release_free_memory() is False
    assert released == ["default", "mimalloc"]  # Arrow's own code still uses mimalloc


def test_a_checkpoint_releases_free_memory_after_its_commit(monkeypatch, tmp_path):
    calls: list[str] = []
    monkeypatch.setattr(watch_checkpoint, "commit",
                        lambda *args: calls.append("commit") or "record")
    monkeypatch.setattr(spark_stream, "forget_taken", lambda *args: calls.append("forget"))
    monkeypatch.setattr(native_memory, "release_free_memory",
                        lambda: calls.append("release") or True)
    pending = SimpleNamespace(take=lambda: {"complex": {"a": [1, 2]}}, committed=0)
    watcher = SimpleNamespace(handed=3, counts=SimpleNamespace(state=lambda: {}))
    annotations = SimpleNamespace(state=lambda: {})
    record = replay._checkpoint(tmp_path, 1, watcher, annotations, pending, None)
    assert record == "record"
    assert calls == ["commit", "forget", "release"]
    assert pending.committed == 2
