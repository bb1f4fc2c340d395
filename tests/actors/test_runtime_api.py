"""One runtime API: both runtimes take their options from one checked table and the same
``run()`` arguments for batching, pacing and registries, checked alike. (That both give
the same net output for the same arguments: ``test_ray_runtime.py``, on Ray.)"""

from __future__ import annotations

import inspect
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import canonical, content

from specula import InProcessRuntime, RayRuntime
from specula.actors.sources import ArrayPart, Sources, arrival_steps
from specula.options import (
    NODE_OPTIONS,
    RUNTIME_ARGUMENTS,
    RUNTIME_OPTIONS,
    CostModel,
    InProcessOptions,
    NodeOptions,
    OptionError,
    RayOptions,
)
from specula.pipelines.synthetic import abc_stream, example_graph

BATCHING = ("registry", "step_ticks", "batch_rows", "speed")


def test_both_runtimes_are_exported_and_import_specula_starts_no_ray():
    code = ("import sys; from specula import RayRuntime, InProcessRuntime; "
            "assert 'ray' not in sys.modules, 'import specula imported ray'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_both_runs_take_the_same_batching_pacing_and_registry_arguments():
    def arguments(run):
        params = inspect.signature(run).parameters
        return {n: (p.kind, p.default) for n, p in params.items() if n in BATCHING}

    assert arguments(InProcessRuntime.run) == arguments(RayRuntime.run)
    assert set(arguments(InProcessRuntime.run)) == set(BATCHING)
    assert set(RUNTIME_ARGUMENTS["run"]) == set(BATCHING) - {"registry"}


@pytest.mark.parametrize(("given", "message"), [
    ({"step_ticks": -1}, "run: step_ticks must be None or an integer >= 0 (ticks of arrival "
                         "time); got -1"),
    ({"step_ticks": 1.5}, "run: step_ticks must be None or an integer >= 0"),
    ({"batch_rows": 0}, "run: batch_rows must be None or an integer >= 1 (rows); got 0"),
    ({"batch_rows": True}, "run: batch_rows must be None or an integer >= 1"),
    ({"speed": 0}, "run: speed must be None or a number > 0 (a multiple of real time); "
                   "got 0"),
    ({"speed": float("nan")}, "run: speed must be None or a number > 0"),
])
def test_both_runs_refuse_a_bad_argument_alike_before_anything_starts(given, message):
    graph = example_graph(1.0, "on-demand", k0=10)
    raw = abc_stream(graph.registry, 20, seed=1)
    said = []
    for runtime in (InProcessRuntime(graph), RayRuntime(graph)):  # no Ray is started
        with pytest.raises(OptionError) as info:
            runtime.run(raw, **given)
        said.append(str(info.value))
    assert said[0] == said[1] and said[0].startswith(message)


def test_both_runs_refuse_batching_an_iterable_alike():
    graph = example_graph(1.0, "on-demand", k0=10)
    batches = [abc_stream(graph.registry, 20, seed=1)]
    for runtime in (InProcessRuntime(graph), RayRuntime(graph)):
        with pytest.raises(OptionError, match="the batches of an iterable are delivered as "
                                              "they come, a step each"):
            runtime.run(iter(batches), batch_rows=5)


@pytest.mark.parametrize(("runtime", "given", "message"), [
    (InProcessRuntime, {"queueing": "yes"},
     "InProcessRuntime: queueing must be None, True or False; got 'yes'"),
    (InProcessRuntime, {"cost_model": 2e-6},
     "InProcessRuntime: cost_model must be None or a CostModel(...) (specula.options); "
     "got 2e-06"),
    (InProcessRuntime, {"ticks_per_second": 0},
     "InProcessRuntime: ticks_per_second must be None or a number > 0; got 0"),
    (InProcessRuntime, {"max_restarts": 1},
     "InProcessRuntime: max_restarts is an option of RayRuntime; InProcessRuntime takes "
     "ticks_per_second, cost_model, trace, keep_messages, queueing"),
    (InProcessRuntime, {"batch_size": 10},
     "InProcessRuntime: unknown option 'batch_size'; InProcessRuntime takes ticks_per_second"),
    (RayRuntime, {"batch_size": 10}, "RayRuntime: unknown option 'batch_size'; RayRuntime "
                                     "takes address, max_in_flight, inbox_events"),
    (RayRuntime, {"speed": 2.0}, "RayRuntime: speed is an option of run; RayRuntime takes"),
    (RayRuntime, {"max_restarts": -1}, "RayRuntime: max_restarts must be an integer >= 0; "
                                       "got -1"),
    (RayRuntime, {"max_in_flight": 0}, "RayRuntime: max_in_flight must be an integer >= 1"),
    (RayRuntime, {"checkpoint_every_s": 0},
     "RayRuntime: checkpoint_every_s must be a number of seconds > 0; got 0"),
    (RayRuntime, {"checkpoint_every_batches": 2.5},
     "RayRuntime: checkpoint_every_batches must be an integer >= 1"),
    (RayRuntime, {"checkpoint_uri": ""}, "RayRuntime: checkpoint_uri must be None or a "
                                         "directory or URI (a non-empty string); got ''"),
    (RayRuntime, {"inbox_events": 0}, "RayRuntime: inbox_events must be an integer >= 1"),
    (RayRuntime, {"step_events": -1}, "RayRuntime: step_events must be an integer >= 0"),
    (RayRuntime, {"address": 6379}, "RayRuntime: address must be None or a Ray address"),
])
def test_runtime_options_are_checked_once_with_what_they_can_be(runtime, given, message):
    graph = example_graph(1.0, "on-demand", k0=10)
    with pytest.raises(OptionError) as info:
        runtime(graph, **given)
    assert str(info.value).startswith(message)


def test_every_runtime_option_has_its_place_a_default_that_passes_and_a_meaning():
    named = [n for names in RUNTIME_ARGUMENTS.values() for n in names]
    assert sorted(named) == sorted(RUNTIME_OPTIONS)  # each in one place, none left out
    for option in RUNTIME_OPTIONS.values():
        assert option.check(option.default) == option.default
        assert option.doc and (option.valid or option.choices)
    # the types of the keyword arguments are those of the tables
    assert set(InProcessOptions.__optional_keys__) == set(RUNTIME_ARGUMENTS["InProcessRuntime"])
    assert set(RayOptions.__optional_keys__) == set(RUNTIME_ARGUMENTS["RayRuntime"])
    assert set(NodeOptions.__optional_keys__) == set(NODE_OPTIONS)


def test_runtimes_take_the_defaults_of_the_table():
    graph = example_graph(1.0, "on-demand", k0=10)
    ray_runtime = RayRuntime(graph)
    for name in RUNTIME_ARGUMENTS["RayRuntime"]:
        assert getattr(ray_runtime, name) == RUNTIME_OPTIONS[name].default, name
    here = InProcessRuntime(graph, cost_model=CostModel())
    assert (here.trace, here.keep_messages, here.queueing) == (False, False, False)
    assert here.ticks_per_second == graph.ticks_per_second


@settings(max_examples=100, deadline=None, derandomize=True)
@given(ats=st.lists(st.integers(0, 200), max_size=120),
       step=st.one_of(st.none(), st.integers(0, 60), st.just(2**63 - 1)),
       rows=st.one_of(st.none(), st.integers(1, 20)))
def test_a_stream_in_memory_is_cut_into_steps_of_step_ticks_and_batch_rows(ats, step, rows):
    ats = np.sort(np.array(ats, np.int64))
    cuts = arrival_steps(ats, step, rows)
    assert [i for a, b in cuts for i in range(a, b)] == list(range(len(ats)))
    for a, b in cuts:
        assert 0 < b - a <= (rows or len(ats))
        assert step is None or ats[b - 1] - ats[a] <= step
        # a step ends at the row bound, at the stream's end, or where the next event
        # arrived more than step_ticks after its first
        assert b - a == rows or b == len(ats) or (step is not None
                                                  and ats[b] - ats[a] > step)


def test_batch_rows_cuts_the_in_process_steps_and_keeps_the_answer():
    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = abc_stream(graph.registry, 2_000, seed=5, max_delay=20)
    span = int(raw["ats"].max() - raw["ats"].min())
    runtimes = [InProcessRuntime(graph, keep_messages=True) for _ in range(2)]
    whole = runtimes[0].run(raw, step_ticks=span)
    rows = runtimes[1].run(raw, step_ticks=span, batch_rows=100)
    parts = InProcessRuntime(graph).run(Sources([ArrayPart(raw[raw["key"] % 2 == j])
                                                 for j in range(2)]), batch_rows=100)
    for name in graph.nodes:
        # on-demand counters are labels: equal by rank
        assert content(canonical(rows.net(name))) == content(
            canonical(whole.net(name))) == content(canonical(parts.net(name))), name
    # the steps a level-1 node sent in (each stamps its own time): 1, then 2,000 / 100
    assert [len({int(b["ats"].max()) for b in rt.messages["big_c"]}) for rt in runtimes] == [
        1, 20]


def test_speed_paces_the_in_process_run_and_changes_nothing_else():
    graph = example_graph(1.0, "on-demand", k0=10)
    raw = abc_stream(graph.registry, 300, seed=2)
    span = int(raw["ts"].max() - raw["ts"].min())  # ticks; 1 tick per second
    fast = InProcessRuntime(graph, cost_model=CostModel()).run(raw)
    t0 = time.perf_counter()
    paced = InProcessRuntime(graph, cost_model=CostModel()).run(raw, speed=span / 0.3)
    assert time.perf_counter() - t0 >= 0.25
    for name in graph.nodes:
        assert content(paced.net(name)) == content(fast.net(name))
        assert np.array_equal(paced.latencies(name), fast.latencies(name))
