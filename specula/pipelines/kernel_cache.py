"""Numba's cache filled with a graph's kernels from the job's start, by a child process.

Every process that runs a detector loads its kernels from Numba's cache (``cache=True``:
files beside the modules, ``__pycache__``), and compiles those the cache lacks. On a
fresh clone it lacks all of them: the soccer graph's took ~17 CPU s to compile
(docs/measurements.md, "The main job"), which the chain hosts would pay before the
first event, on top of their start. :func:`filling` starts a child process at the job's
start that compiles them (:meth:`~specula.detectors.graph.Instance.warm_up` of every
instance) while the job generates its log and starts Spark and Ray, which leave a core
idle much of the time; the hosts then load from the cache what it has written. With the
cache filled already, the child only loads the kernels (under a CPU second).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from specula.detectors.graph import Graph

#: Seconds the child gets to end after it is killed.
STOP_S = 5.0


@contextlib.contextmanager
def filling(graph: Graph, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that warms up every instance of ``graph`` (filling Numba's cache)
    while the block runs, writing what it prints to ``log``; yields it. It is ended
    when the block ends, done or not: nothing of it outlives the job."""
    from ray import cloudpickle

    log.parent.mkdir(parents=True, exist_ok=True)
    fd, spec = tempfile.mkstemp(prefix="specula-kernels-", suffix=".pickle")
    with os.fdopen(fd, "wb") as file:
        file.write(cloudpickle.dumps((graph.instances(), graph.registry)))
    try:
        with log.open("ab") as sink:
            child = subprocess.Popen([sys.executable, "-m", __name__, spec],
                                     stdin=subprocess.DEVNULL, stdout=sink, stderr=sink)
        try:
            yield child
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(STOP_S)
    finally:
        os.unlink(spec)


def _warm_up(spec: str) -> None:
    """The child: warm up the instances in the file ``spec`` (with their registry)."""
    from ray import cloudpickle

    instances, registry = cloudpickle.loads(Path(spec).read_bytes())
    for instance in instances:
        instance.warm_up(registry)


if __name__ == "__main__":
    _warm_up(sys.argv[1])
