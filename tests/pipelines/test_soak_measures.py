"""The live-faults soak's growth figures (``benchmarks/live_faults.py --soak``): the Ray
workers, started again at every segment, are measured by each segment's peak."""

from __future__ import annotations

import pytest

from benchmarks.live_faults import measures, segment_peaks, slope_per_min


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


def test_the_jvms_growth_is_that_of_their_rss_after_full_collections():
    figures = measures(_saw_tooth(0.0), [(60.0 * k, 1000.0 + 3 * k) for k in range(6)],
                       {"driver_rss_mb_per_min": 1.5})
    assert figures["jvm_mb_per_min"] == pytest.approx(3.0)
    assert figures["driver_mb_per_min"] == 1.5
    assert measures(_saw_tooth(0.0), [], {"driver_rss_mb_per_min": 1.5})["jvm_mb_per_min"] is None
