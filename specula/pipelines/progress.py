"""Progress of the main job, phase by phase, on stderr: generation, Spark's start,
ingestion, Ray's start, detection (a bar over the events), persistence and plots.

Drawn with ``rich`` (a live display that each phase adds a line to, with its elapsed
time); disabled, every call is a no-op, so the job's code reads the same either way.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from specula.cluster import check_interrupt


class JobProgress:
    """The phases of one run; use as a context manager around the run."""

    def __init__(self, enabled: bool) -> None:
        self._progress: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(SpinnerColumn(finished_text="done"),
                                      TextColumn("{task.description:<30}"), BarColumn(),
                                      TimeElapsedColumn(), TextColumn("{task.fields[count]}"),
                                      console=Console(stderr=True))

    def __enter__(self) -> JobProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def say(self, message: str) -> None:
        """Print a line for the user above the progress lines (on stderr)."""
        if self._progress is not None:
            self._progress.console.print(message)
        else:
            print(message, file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def phase(self, description: str, total: int | None = None) -> Iterator[Phase]:
        """A phase: a line that runs until the block ends; yields its :class:`Phase`
        (``advance(n)``, and ``note(text)`` for what the line says at the end). An
        interrupt that the last phase swallowed ends the job here
        (:func:`~specula.cluster.check_interrupt`)."""
        check_interrupt()
        phase = Phase(self._progress, description, total)
        try:
            yield phase
        finally:
            phase.end()

    def events(self, batches: Iterable[np.ndarray], advance: Callable[[int], None]
               ) -> Iterator[np.ndarray]:
        """Pass ``batches`` on, advancing the phase by their events."""
        for batch in batches:
            yield batch
            advance(len(batch))


class Phase:
    """One phase's line: called with ``n``, it advances by ``n`` events; :meth:`note`
    adds what the phase measured to the line (the detection's start-up and stream
    times). A no-op without a display."""

    def __init__(self, progress: Any, description: str, total: int | None) -> None:
        self._progress, self._total, self._done, self._note = progress, total, 0, ""
        self._task = None if progress is None else \
            progress.add_task(description, total=total, count="")

    def __call__(self, n: int) -> None:
        self._done += n
        self._show(n)

    def note(self, text: str) -> None:
        """Say ``text`` after the count of events (no longer out of the total: the
        phase is over), from now on."""
        self._note = text
        self._show(0)

    def end(self) -> None:
        """Mark the phase done."""
        if self._progress is not None:
            self._progress.update(self._task, total=self._total or 1,
                                  completed=self._total or 1)

    def _show(self, advance: int) -> None:
        if self._progress is None:
            return
        done, total = self._done, self._total
        if self._note:  # the phase is over: its events, and what it measured
            count = ", ".join(c for c in (f"{done:,} events" if done else "", self._note)
                              if c)
        else:
            count = f"{done:,} of {total:,} events" if total else \
                f"{done:,} events" if done else ""
        self._progress.update(self._task, advance=advance, count=count)
