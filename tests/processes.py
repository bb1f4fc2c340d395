"""The processes a test started, when tests run in parallel.

The suite runs on several pytest-xdist workers at once (``make test``), so the Ray and
Spark processes on the machine may belong to a test running beside this one. Every
process a worker starts (Ray's raylet and workers, Spark's JVMs and executors, a
``specula`` subprocess and what it starts) inherits the worker's ``PYTEST_XDIST_WORKER``,
so a check for processes left behind looks at this worker's only.
"""

from __future__ import annotations

import os
from pathlib import Path


def this_worker(lines: list[str]) -> list[str]:
    """The ``ps -eo pid,args`` lines (a pid first) of processes this pytest worker
    started: those whose environment carries its ``PYTEST_XDIST_WORKER``; every line
    when the tests run in one process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return lines
    mark = f"PYTEST_XDIST_WORKER={worker}".encode()
    ours = []
    for line in lines:
        try:
            environ = Path(f"/proc/{line.split(None, 1)[0]}/environ").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        if mark in environ.split(b"\0"):
            ours.append(line)
    return ours
