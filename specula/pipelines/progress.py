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
    def phase(self, description: str, total: int | None = None
              ) -> Iterator[Callable[[int], None]]:
        """A phase: a line that runs until the block ends; yields ``advance(n)``."""
        if self._progress is None:
            yield lambda n: None
            return
        progress = self._progress
        task = progress.add_task(description, total=total, count="")
        done = 0

        def advance(n: int) -> None:
            nonlocal done
            done += n
            count = f"{done:,} of {total:,} events" if total else f"{done:,} events"
            progress.update(task, advance=n, count=count)

        try:
            yield advance
        finally:
            progress.update(task, total=total or 1, completed=total or 1)

    def events(self, batches: Iterable[np.ndarray], advance: Callable[[int], None]
               ) -> Iterator[np.ndarray]:
        """Pass ``batches`` on, advancing the phase by their events."""
        for batch in batches:
            yield batch
            advance(len(batch))
