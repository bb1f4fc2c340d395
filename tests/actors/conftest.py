"""Fixtures of the runtime tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """Embedded Ray for a module's tests; the test detectors of ``tests/graph_shapes.py``
    travel by value (the workers cannot import ``tests/``)."""
    ray = pytest.importorskip("ray")
    import graph_shapes
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(graph_shapes)
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             log_to_driver=False)
    yield
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(graph_shapes)
