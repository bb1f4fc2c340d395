"""The main job's progress lines, without Spark: what a user sees on stderr."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from specula.pipelines.progress import JobProgress


def test_each_phase_gets_a_line_and_detection_counts_the_events(capsys):
    batches = [np.zeros(n) for n in (400, 350, 250)]
    with JobProgress(True) as progress:
        with progress.phase("starting Spark"):
            pass
        with progress.phase("detecting (Ray)", 1_000) as advance:
            seen = sum(len(b) for b in progress.events(batches, advance))
    assert seen == 1_000
    err = capsys.readouterr().err
    assert "starting Spark" in err and "detecting (Ray)" in err
    assert "1,000 of 1,000 events" in err
    assert err.count("done") == 2


def test_a_phase_line_says_what_the_phase_measured(capsys):
    with JobProgress(True) as progress, progress.phase("detecting (Ray)", 10) as detecting:
        detecting(10)
        detecting.note("start-up 1.2 s, stream 3.4 s")
    err = capsys.readouterr().err
    assert "10 events, start-up 1.2 s, stream 3.4 s" in err


def test_disabled_progress_writes_nothing(capsys):
    with JobProgress(False) as progress, progress.phase("ingesting", 10) as advance:
        list(progress.events([np.zeros(10)], advance))
    assert capsys.readouterr() == ("", "")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the one
def test_an_interrupt_a_finalizer_swallowed_ends_the_job_at_the_next_phase():
    """Ctrl-C landing in a finalizer is printed as "Exception ignored in" and lost to
    the code it interrupted; the job's next phase raises it again."""
    from specula.cluster import clear_interrupt, interrupt

    class Finalized:
        def __del__(self) -> None:
            interrupt(signal.SIGINT, None)  # as if the signal came while it ran

    clear_interrupt()
    try:
        with JobProgress(False) as progress:
            with progress.phase("generating"):
                Finalized()  # collected at once: the interrupt goes no further
            with pytest.raises(KeyboardInterrupt), progress.phase("starting Spark"):
                pytest.fail("the phase after the interrupt started")
    finally:
        clear_interrupt()
    with JobProgress(False) as progress, progress.phase("the next command's"):
        pass
