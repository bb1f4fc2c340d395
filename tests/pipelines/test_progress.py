"""The main job's progress lines, without Spark: what a user sees on stderr."""

from __future__ import annotations

import numpy as np

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
