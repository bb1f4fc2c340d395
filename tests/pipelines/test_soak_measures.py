"""The live-faults soak's growth figures (``benchmarks/live_faults.py --soak``): the Ray
workers, started again at every segment, are measured by each segment's peak."""

from __future__ import annotations

import os

import pytest

from benchmarks.live_faults import (
    jvm_kept,
    measures,
    rss_mb,
    segment_peaks,
    slope_per_min,
    window_minima,
)


def _saw_tooth(growth_per_segment: float, segments: int = 10) -> list[tuple[float, dict]]:
    """Samples every 5 s of workers that start at 300 MB each 60 s segment and grow to
    900 MB within it, each segment's peak ``growth_per_segment`` above the last's."""
    samples = []
    for k in range(segments):
        for i in range(12):
            t = 60.0 * k + 5.0 * i
            samples.append((t, {"segment": k - 1, "actors": 300 + 50 * i
                                + growth_per_segment * k, "driver": 400.0}))
    return samples


@pytest.mark.parametrize("cut", [0, 20, 35, 50])
def test_a_flat_saw_tooth_has_no_peak_growth_wherever_the_window_cuts_it(cut):
    samples = _saw_tooth(0.0)[cut:]
    assert measures(samples, [], {"driver_rss_mb_per_min": 0.0})["actors_mb_per_min"] == (
        pytest.approx(0.0, abs=1e-6))


def test_peaks_grow_with_the_segments_and_cut_segments_are_left_out():
    samples = _saw_tooth(10.0)[30:-4]  # the window cuts the first and last segments
    times, peaks = segment_peaks(samples, "actors")
    assert len(peaks) == 6  # segments 3 to 8 of 2 to 9
    assert slope_per_min(times, peaks) == pytest.approx(10.0)


def _collections(outside_per_min: float, floor_per_min: float) -> list[tuple[float, dict]]:
    """Every 30 s for 10 minutes, two JVMs: the driver JVM's live heap flat at 100 MB,
    the executor's at one of three levels in streaks of 2 minutes (55, 170, 115 MB, the
    lowest rising by ``floor_per_min``), what they committed outside their heaps rising
    by ``outside_per_min``."""
    levels = [0.0, 115.0, 60.0]
    points = []
    for k in range(20):
        t = 30.0 * k
        minutes = t / 60
        executor = 55 + levels[(k // 4) % 3] + floor_per_min * minutes
        points.append((t, {"jvms": [
            {"pid": 1, "live_heap": 100.0, "outside_heap": 400 + outside_per_min * minutes},
            {"pid": 2, "live_heap": executor, "outside_heap": 250.0}]}))
    return points


def test_the_jvms_growth_is_their_native_memorys_and_their_live_heaps_floors():
    samples = _saw_tooth(0.0)
    streaks = _collections(3.0, 0.0)
    kept = [sum(j["live_heap"] + j["outside_heap"] for j in v["jvms"]) for _, v in streaks]
    assert abs(slope_per_min([t for t, _ in streaks], kept) - 3.0) > 2  # the streaks' sway
    figures = measures(samples, streaks, {"driver_rss_mb_per_min": 1.5})
    assert figures["jvm_mb_per_min"] == pytest.approx(3.0, abs=0.5)
    assert figures["driver_mb_per_min"] == 1.5
    leaking = measures(samples, _collections(0.0, 8.0), {"driver_rss_mb_per_min": 1.5})
    assert leaking["jvm_mb_per_min"] == pytest.approx(8.0, abs=1.5)
    assert measures(samples, [], {"driver_rss_mb_per_min": 1.5})["jvm_mb_per_min"] is None


def test_window_minima_are_the_lowest_of_each_window_with_their_times():
    points = [(0.0, 5.0), (30.0, 3.0), (60.0, 4.0), (95.0, 9.0), (150.0, 7.0)]
    assert window_minima(points, 90.0) == ([30.0, 150.0], [3.0, 7.0])
    assert window_minima([], 90.0) == ([], [])


_JCMD_SAYS = """{pid}:
Command executed successfully
{pid}:
 garbage-first heap   total 524288K, used 153600K [0x00000000c0000000, 0x0000000100000000)
  region size 1024K, 3 young (3072K), 0 survivors (0K)
{pid}:

Native Memory Tracking:

Total: reserved=2457600KB, committed=870400KB
-                 Java Heap (reserved=1048576KB, committed=524288KB)
                            (mmap: reserved=1048576KB, committed=524288KB)

-                     Class (reserved=1056768KB, committed=40960KB)
                            (classes #12000)

-                        GC (reserved=102400KB, committed=51200KB)
                            (malloc=10240KB #2000)
"""


def test_what_a_jvm_keeps_is_its_live_heap_and_what_it_committed_besides(tmp_path):
    """A stand-in ``jcmd`` answers the three commands of a file as JDK 17's does."""
    jcmd = tmp_path / "jcmd"
    jcmd.write_text(f"#!/bin/sh\ncat <<'EOF'\n{_JCMD_SAYS.format(pid=os.getpid())}EOF\n")
    jcmd.chmod(0o755)
    kept = jvm_kept(str(jcmd), os.getpid())
    assert kept is not None
    assert kept["pid"] == os.getpid() and kept["live_heap"] == 150.0  # after the collection
    # NMT's committed less the heap and less G1's tables, which follow the heap
    assert kept["outside_heap"] == (870400 - 524288 - 51200) / 1024
    assert kept["rss_kept"] == pytest.approx(rss_mb(os.getpid()) - (512 - 150), abs=5)
    assert kept["nmt:Java Heap"] == 512.0 and kept["nmt:Class"] == 40.0
    jcmd.write_text("#!/bin/sh\necho 'Native memory tracking is not enabled'\n")
    assert jvm_kept(str(jcmd), os.getpid()) is None
