"""Budgets and checks shared by the fuzz tests (``test_fuzz_*.py``, one per room).

Every surface where input enters (the DEBS readers, Spark ingestion, events and the
codec, the rule parser, graph declarations, the CLI) has a ``test_fuzz_*.py`` beside its
room's other tests, marked ``fuzz``. They run in the default suite on a fixed budget
(:func:`budget`: a few dozen to a few hundred examples, derandomized, so CI always tries
the same inputs); ``SPECULA_SOAK=1`` runs each with many more examples, drawn at random
(``SPECULA_SOAK_EXAMPLES`` sets how many per test), e.g.::

    SPECULA_SOAK=1 python -m pytest -m fuzz tests

A failing soak example prints its ``@reproduce_failure`` blob; the fix gets a named
regression test beside the fuzz test that found it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SOAK = os.environ.get("SPECULA_SOAK") == "1"


def budget(examples: int) -> settings:
    """Settings of a fuzz test: ``examples`` derandomized examples in the default suite;
    under ``SPECULA_SOAK=1``, ``SPECULA_SOAK_EXAMPLES`` (default 50 times as many) random
    ones, reporting every distinct failure."""
    if SOAK:
        return settings(max_examples=int(os.environ.get("SPECULA_SOAK_EXAMPLES",
                                                        50 * examples)),
                        deadline=None, derandomize=False, print_blob=True,
                        report_multiple_bugs=True, suppress_health_check=list(HealthCheck))
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    report_multiple_bugs=False, suppress_health_check=list(HealthCheck))


class HangError(AssertionError):
    """An input that took longer than it may."""


@contextmanager
def no_hang(seconds: int = 10) -> Iterator[None]:
    """Fail with :class:`HangError` if the block runs longer than ``seconds`` (SIGALRM: the
    main thread of a POSIX process, which is where pytest runs tests)."""

    def expire(signum: int, frame: object) -> None:
        raise HangError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------ DEBS 2013 lines

#: The first 200 lines of the real DEBS 2013 sample, without their line ends.
SAMPLE_LINES = (Path(__file__).parent / "data/debs2013/sample-pregame-2000.csv"
                ).read_bytes().splitlines()[:200]

NOISE = b",-0123456789 \t\x00\xff\xe9e.+x\r"


@st.composite
def debs_lines(draw: st.DrawFn) -> bytes:
    """A sample line, one with a few bytes changed, deleted or added, or noise."""
    kind = draw(st.sampled_from(["sample", "damaged", "damaged", "noise", "blank"]))
    if kind == "noise":  # (a line 1 starting with a byte order mark would lose it)
        noise = draw(st.binary(max_size=40)).replace(b"\n", b"").replace(b"\r", b"")
        return noise[3:] if noise.startswith(b"\xef\xbb\xbf") else noise
    if kind == "blank":
        return draw(st.sampled_from([b"", b" ", b"\t \x0b"]))
    line = bytearray(draw(st.sampled_from(SAMPLE_LINES)))
    for _ in range(draw(st.integers(1, 3)) if kind == "damaged" else 0):
        at = draw(st.integers(0, len(line) - 1))
        byte = draw(st.sampled_from(NOISE))
        edit = draw(st.sampled_from(["set", "delete", "insert"]))
        if edit == "set":
            line[at] = byte
        elif edit == "delete":
            del line[at]
        else:
            line.insert(at, byte)
    return bytes(line).replace(b"\r", b"")  # line endings are the file's, drawn below
