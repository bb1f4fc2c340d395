"""Plots of a run, like the paper's Fig. 10 and 11, written as PNG files."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from specula.actors.report import RunReport


def plot_latency(runs: dict[str, RunReport], detector: str, path: str | Path) -> Path:
    """Fig. 10: the detection latency of ``detector`` over the run, one line per run
    (e.g. pure K-slack and adaptive speculation). Time and latency in seconds; a plot
    with nothing to show says so."""
    return _save(latency_figure(runs, detector), path)


def latency_figure(runs: dict[str, RunReport], detector: str):
    """The figure of :func:`plot_latency`."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for label, report in runs.items():
        times, lat = report.detectors[detector].net.timeline()
        if len(times):
            t = (times - times[0]) * report.seconds_per_tick
            ax.plot(t, lat * report.seconds_per_tick, marker=".", label=label)
    ax.set_xlabel("time since the first detection [s]")
    ax.set_ylabel("detection latency [s]")
    ax.set_title(f"{detector}: detection latency")
    if ax.lines:
        ax.legend()
    else:
        _note(ax, f"no detections of {detector} in this run")
    ax.grid(alpha=0.3)
    return fig


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
