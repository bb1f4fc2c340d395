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

from hypothesis import HealthCheck, settings

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
