"""Plots of a run, like the paper's Fig. 10 and 11, written as PNG files."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from specula.actors.report import RunReport

#: The start-up backlog lasts until a detection's latency first comes down to this many
#: times the steady latency (the 95th percentile over the run's second half).
STARTUP_FACTOR = 2.0
#: Fewer detections than this in the run's second half tell no steady latency.
STARTUP_MIN_REFERENCE = 10


def plot_latency(runs: dict[str, RunReport], detector: str, path: str | Path) -> Path:
    """Fig. 10: the detection latency of ``detector`` over the run, one line per run
    (e.g. pure K-slack and adaptive speculation). Time and latency in seconds; a plot
    with nothing to show says so."""
    return _save(latency_figure(runs, detector), path)


def latency_figure(runs: dict[str, RunReport], detector: str):
    """The figure of :func:`plot_latency`: the whole run, its start-up backlog
    (:func:`startup_end`) shaded, and below it the steady state alone on its own
    y-range; each run's median and p99 after the start-up in the legend. One panel when
    no run had a backlog, or to say why when none detected anything."""
    series = {label: _latency_series(report, detector) for label, report in runs.items()}
    series = {label: s for label, s in series.items() if len(s[0])}
    startup = max((startup_end(t, lat) for t, lat in series.values()), default=0.0)
    fig, axes = plt.subplots(2 if startup > 0 else 1, 1, squeeze=False,
                             figsize=(8, 6.5 if startup > 0 else 4))
    whole, steady = axes[0, 0], axes[-1, 0]
    whole.set_title(f"{detector}: detection latency")
    if not series:
        _note(whole, f"no detections of {detector} in this run")
        return fig
    for label, (t, lat) in series.items():
        after = t >= startup
        median, p99 = np.percentile(lat[after], [50, 99])
        stats = f"{label}: median {median:.3g} s, p99 {p99:.3g} s"
        whole.plot(t, lat, marker=".", markersize=3, linewidth=0.8,
                   label=label if startup > 0 else stats)
        if startup > 0:
            steady.plot(t[after], lat[after], marker=".", markersize=3, linewidth=0.8,
                        label=stats)
    if startup > 0:
        whole.axvspan(0, startup, color="grey", alpha=0.25,
                      label=f"start-up backlog ({startup:.1f} s)")
        whole.set_title(f"{detector}: detection latency, whole run")
        steady.set_title(f"steady state (from {startup:.1f} s)")
    for ax in {whole, steady}:
        ax.set_xlabel("time since the first detection [s]")
        ax.set_ylabel("detection latency [s]")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    return fig


def startup_end(t: np.ndarray, lat: np.ndarray) -> float:
    """When the start-up backlog has drained: the time of the first detection whose
    latency is at most :data:`STARTUP_FACTOR` times the steady latency (95th percentile
    over the second half of the run); 0 when the first detection already is, or when
    the second half holds fewer than :data:`STARTUP_MIN_REFERENCE` detections (too few
    to tell a backlog from noise). A later spike is the steady state's own and stays in
    it; the start-up is at most the first half of the run."""
    half = t[-1] / 2 if len(t) else 0.0
    if np.count_nonzero(t >= half) < STARTUP_MIN_REFERENCE:
        return 0.0
    bound = STARTUP_FACTOR * float(np.percentile(lat[t >= half], 95))
    drained = np.flatnonzero(lat <= bound)
    end = float(t[drained[0]]) if len(drained) else float(half)
    return min(end, float(half))


def _latency_series(report: RunReport, detector: str) -> tuple[np.ndarray, np.ndarray]:
    """(time since the first detection, latency) of ``detector``'s net output, in s."""
    times, lat = report.detectors[detector].net.timeline()
    if not len(times):
        return np.zeros(0), np.zeros(0)
    return ((times - times[0]) * report.seconds_per_tick,
            lat * report.seconds_per_tick)


def plot_alpha(report: RunReport, instance: str, path: str | Path) -> Path:
    """Fig. 11: alpha and the busy factor of one unit over the run (adaptive runs)."""
    hist = report.time_series().get(instance, {})
    fig, ax = plt.subplots(figsize=(8, 4))
    if hist.get("alpha.time"):
        t0 = hist["alpha.time"][0]
        t = [x - t0 for x in hist["alpha.time"]]
        ax.step(t, hist["alpha.alpha"], where="post", label="alpha")
        ax.plot(t, hist["alpha.busy_factor"], linestyle="--", label="busy factor")
        ax.axhspan(0.8, 0.9, color="grey", alpha=0.2, label="target zone")
    ax.set_xlabel("time [s]")
    ax.set_ylim(0, 1.2)
    ax.set_title(f"{instance}: alpha adaptation")
    if ax.lines:
        ax.legend()
    else:
        _note(ax, f"no alpha adaptation recorded for {instance}")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _note(ax, text: str) -> None:
    """Say in the middle of an empty plot why it is empty."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes,
            fontsize=12, color="grey")


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
