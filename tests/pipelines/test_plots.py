"""The latency plot shows the steady state: the start-up backlog found, shaded and left
out of the steady panel, whose y-range is its own."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.patches import Rectangle

from specula.pipelines.plots import latency_figure, plot_latency, startup_end


def _backlog(drain_s: float, seconds: float = 60.0, seed: int = 0):
    """Latencies of a run whose first ``drain_s`` seconds drain a backlog of 3 s down to
    a steady ~50 ms with spikes of 0.4 s."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, seconds, 600))
    t[0] = 0.0
    lat = 0.05 + rng.exponential(0.01, len(t))
    if drain_s:
        lat += 3.0 * np.clip(1 - t / drain_s, 0, None)
    lat[rng.integers(len(t) // 2, len(t), 3)] += 0.4
    return t, lat


def _report(t, lat, detector="passes"):
    """A run report as the plots read it: the net timeline in ns ticks."""
    ticks = (np.asarray(t) * 1e9).astype(np.int64) + 10**12
    net = SimpleNamespace(timeline=lambda: (ticks, (np.asarray(lat) * 1e9).astype(np.int64)))
    return SimpleNamespace(detectors={detector: SimpleNamespace(net=net)},
                           seconds_per_tick=1e-9)


@pytest.mark.parametrize("drain_s", [2.0, 4.0, 12.0])
def test_the_startup_ends_when_the_backlog_has_drained(drain_s):
    t, lat = _backlog(drain_s, seed=int(drain_s))
    end = startup_end(t, lat)
    assert drain_s * 0.9 < end <= t[t >= drain_s][0]  # at the latest the first one after
    assert np.all(lat[t >= end] < 0.5)  # only the steady spikes are left


def test_a_run_without_backlog_has_no_startup_and_late_spikes_stay_steady():
    t, lat = _backlog(0.0)
    assert startup_end(t, lat) == 0.0
    assert startup_end(np.zeros(0), np.zeros(0)) == 0.0
    sparse = np.array([0.0, 0.4, 0.8, 3.0]), np.array([3.0, 0.1, 0.1, 0.1])
    assert startup_end(*sparse) == 0.0  # four detections tell no steady latency
    fig = latency_figure({"run": _report(t, lat)}, "passes")
    (ax,) = fig.axes  # no backlog: one panel, the whole run, its figures in the legend
    assert not ax.patches and "median" in ax.get_legend().get_texts()[0].get_text()
    plt.close(fig)


def test_the_figure_shades_the_startup_and_scales_the_steady_panel_to_itself(tmp_path):
    runs = {"adaptive": _report(*_backlog(3.0, seed=1)),
            "K-slack": _report(*_backlog(5.0, seed=2))}
    fig = latency_figure(runs, "passes")
    whole, steady = fig.axes
    (shaded,) = [p for p in whole.patches if isinstance(p, Rectangle)]  # the axvspan
    end = startup_end(*_backlog(5.0, seed=2))  # the later of the two
    assert shaded.get_x() == 0 and shaded.get_width() == pytest.approx(end, abs=1e-6)
    assert whole.get_ylim()[1] > 3.0 > 1.0 > steady.get_ylim()[1]
    assert all(line.get_xdata().min() >= end - 1e-6 for line in steady.lines)
    assert all("median" in t.get_text() and "p99" in t.get_text()
               for t in steady.get_legend().get_texts())
    plt.close(fig)
    path = plot_latency(runs, "passes", tmp_path / "passes.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
