"""The child process that fills Numba's cache with a graph's kernels from the job's
start (:mod:`specula.pipelines.kernel_cache`): it warms up the graph it is given, and
it does not outlive the block that started it."""

from __future__ import annotations

from pathlib import Path

from specula.pipelines.kernel_cache import filling
from specula.pipelines.synthetic import example_graph


def test_the_child_warms_up_every_instance_of_the_graph(tmp_path):
    log = tmp_path / "logs" / "kernel-cache.log"
    with filling(example_graph(0.0, "on-demand"), log) as child:
        assert child.wait(120) == 0, log.read_text()
    assert log.read_text() == ""


def test_a_child_still_running_is_ended_with_the_block(tmp_path):
    with filling(example_graph(0.0, "on-demand"), tmp_path / "kernel-cache.log") as child:
        assert child.poll() is None  # still importing
    assert child.returncode is not None and child.returncode < 0  # killed
    assert not Path(child.args[-1]).exists()  # the graph it was given, removed
