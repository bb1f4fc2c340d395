import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# Checkpoints are signed with a key derived from the user's key file
# (`specula.actors.signing`): the tests, and the `specula` subprocesses they start, use
# one of their own instead of creating one in the home folder.
os.environ.setdefault("SPECULA_KEY_FILE", os.path.join(
    tempfile.mkdtemp(prefix="specula-test-key-"), "checkpoint.key"))

# The JVMs the tests start (Spark's driver and executors, in this process and in every
# `specula replay` subprocess, which inherit the environment, and the standalone
# master and worker) live for seconds, not hours: C1 alone compiles Spark's planner and
# generated code in a fraction of the time C2 takes to warm up on a small machine, and
# changes nothing they compute. Specula itself does so only for a small log
# (`SMALL_INPUT_BYTES`); a watched log, whose size it cannot know, gets C1 here too.
_QUICK_JIT = "-XX:TieredStopAtLevel=1"
if _QUICK_JIT not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = " ".join(
        filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), _QUICK_JIT]))


# Tests that start Ray or Spark (marked `cluster`; a test that uses the `spark` fixture is
# marked here) run one after another on one `pytest-xdist` worker (`--dist loadgroup`),
# in the order a serial run gives them: two clusters at once on a small machine starve
# each other. The other tests run beside them.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in item.fixturenames:
            item.add_marker(pytest.mark.cluster)
        if item.get_closest_marker("cluster") is not None:
            item.add_marker(pytest.mark.xdist_group("cluster"))


def _clusters_up() -> tuple[bool, bool]:
    """Whether this process has an embedded Ray cluster and a Spark session now."""
    ray = sys.modules.get("ray")
    pyspark = sys.modules.get("pyspark")
    return (ray is not None and ray.is_initialized(),
            pyspark is not None and pyspark.SparkContext._active_spark_context is not None)


def _check_unmarked_start(item: pytest.Item, before: tuple[bool, bool]) -> None:
    if item.get_closest_marker("cluster") is not None:
        return
    for name, was, now in zip(("Ray", "a Spark session"), before, _clusters_up(),
                              strict=True):
        if now and not was:
            pytest.fail(f"{item.nodeid} starts {name}: mark it `pytest.mark.cluster`",
                        pytrace=False)


def _watch_phase(item: pytest.Item):
    """Around a test's setup or call: did it start Ray or Spark unmarked?"""
    before = _clusters_up()
    result = yield
    _check_unmarked_start(item, before)
    return result


pytest_runtest_setup = pytest.hookimpl(wrapper=True)(_watch_phase)
pytest_runtest_call = pytest.hookimpl(wrapper=True)(_watch_phase)


@pytest.fixture(scope="module")
def local_ray():
    """Embedded Ray for a module's tests; the test detectors of ``tests/graph_shapes.py``
    travel by value (the workers cannot import ``tests/``)."""
    ray = pytest.importorskip("ray")
    import graph_shapes
    from ray import cloudpickle

    from specula.cluster.ray_access import loopback_only

    cloudpickle.register_pickle_by_value(graph_shapes)
    with loopback_only():  # as specula's own embedded Ray
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
                 log_to_driver=False)
    yield
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(graph_shapes)
