"""Which chain hosts the pool may give a later run (:func:`specula.actors.pool.pool_key`);
the pool on Ray is tested in ``test_ray_runtime.py``."""

from __future__ import annotations

from specula import Graph
from specula.actors.pool import pool_key
from specula.detectors.examples import Threshold, example_registry


def test_hosts_are_filed_by_their_options_and_a_chain_asking_for_resources_is_not_pooled():
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    g = Graph(example_registry(), sources=("C",))
    g.add("plain", Threshold())
    g.add("heavy", Threshold(), cpus=1.0)
    plain, heavy = g.instances()
    spread = {"scheduling_strategy": "SPREAD", "max_concurrency": 10}
    assert pool_key([plain], spread) == pool_key([plain], dict(spread))
    assert pool_key([plain], spread) != pool_key([plain], {**spread, "max_concurrency": 11})
    on = [pool_key([plain], {"scheduling_strategy": NodeAffinitySchedulingStrategy(n, True)})
          for n in ("aa" * 28, "aa" * 28, "bb" * 28)]
    assert on[0] == on[1] != on[2]
    assert pool_key([heavy], {"num_cpus": 1.0}) is None
    assert pool_key([plain, heavy], spread) is None
