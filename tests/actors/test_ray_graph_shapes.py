"""On generated graphs of every shape, the Ray runtime gives the in-process runtime's answers.

The graphs come from the generator of ``tests/graph_shapes.py`` (multi-output producers,
type-subset and partitioned subscribers, fan-ins, stateful detectors), with every K
starting above the stream's span, so that nothing is late whatever the timing on Ray:
then every detector's net output must be the same on both runtimes.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from graph_shapes import RAW, Case, Closing, seeded_case
from naive import canonical, content, reference_graph

from specula import InProcessRuntime
from specula.actors.ray_runtime import RayRuntime

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # starts embedded Ray

ray = pytest.importorskip("ray")

#: Actors are processes: keep each graph small.
MAX_INSTANCES = 6


def small_cases(modes: tuple[str, ...], n: int,
                wanted: Callable[[Case], bool] = lambda case: True) -> list:
    """The first ``n`` seeds whose graph has 3 nodes or more but at most
    :data:`MAX_INSTANCES` instances, and is ``wanted``, with nothing late, as test
    parameters."""
    found = []
    seed = 0
    while len(found) < n:
        case = seeded_case(seed, modes=modes, max_events=60)
        if len(case.nodes) >= 3 and sum(s.partitions for s in case.nodes) <= MAX_INSTANCES \
                and wanted(case):
            found.append(pytest.param(case.nothing_late(), id=f"seed{seed}"))
        seed += 1
    return found


def same_answers(case: Case, chaining: str | list[list[str]] = "none") -> None:
    """Nothing late on either runtime, and every net output the same on both. A failure
    says which of the two equals the in-order graph."""
    graph = case.graph()
    raw = case.raw(graph.registry)
    here = InProcessRuntime(graph).run(raw, step_ticks=case.step_ticks)
    on_ray = RayRuntime(graph, max_in_flight=2, chaining=chaining).run(raw, batch_rows=5)
    in_order = reference_graph(graph, raw)
    for name in graph.nodes:
        assert len(here.late(name)) == len(on_ray.late(name)) == 0, name
        if content(canonical(on_ray.net(name))) != content(canonical(here.net(name))):
            agree = {runtime: content(canonical(report.net(name))) == content(in_order[name])
                     for runtime, report in (("Ray", on_ray), ("in-process", here))}
            raise AssertionError(f"{name}: Ray and in-process differ (equal to the in-order "
                                 f"graph: {agree}) on\n{case!r}")


@pytest.mark.parametrize("case", small_cases(("full",), 3))
def test_full_retraction_on_ray_equals_in_process(local_ray, case):
    same_answers(case)


@pytest.mark.parametrize("case", small_cases(("full", "on-demand"), 3))
def test_any_retraction_on_ray_equals_in_process(local_ray, case):
    same_answers(case)


def ends_above_level_1(case: Case) -> bool:
    """Does a detector that hears only detectors (so the end of its producers ends it
    in an ordinary step) emit at the end of the stream to a consumer?"""
    read = {t for s in case.nodes for t in s.detector.inputs}
    return any(isinstance(s.detector, Closing) and not set(s.detector.inputs) & set(RAW)
               and read & set(s.detector.outputs) for s in case.nodes)


@pytest.mark.parametrize("case", small_cases(("full", "on-demand"), 2, ends_above_level_1))
def test_what_detectors_emit_at_the_end_reaches_their_consumers_on_ray(local_ray, case):
    same_answers(case)


# Chained instances, in random groupings (partitions of one node together included),
# give the answers of one actor per instance (the tests above) and of in-process.
@pytest.mark.parametrize("case", small_cases(("full", "on-demand"), 3, lambda case: any(
    s.partitions > 1 for s in case.nodes)) + small_cases(("on-demand",), 2))
def test_random_chains_on_ray_equal_in_process(local_ray, case):
    from test_chain import random_plan

    graph = case.graph()
    same_answers(case, random_plan(graph, random.Random(repr(case))))
