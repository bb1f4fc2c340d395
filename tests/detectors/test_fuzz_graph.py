"""Fuzzing graph declarations: any name, detector and option values either declare a
node that runs, or raise a ValueError (:class:`GraphError`, :class:`OptionError`) whose
message names the node and the option, before anything runs.
"""

from __future__ import annotations

import numpy as np
import pytest
from fuzzing import budget, no_hang
from hypothesis import given
from hypothesis import strategies as st

from specula import InProcessRuntime
from specula.detectors.examples import CountPerKey, Threshold, example_registry
from specula.detectors.graph import Graph, GraphError
from specula.options import NODE_OPTIONS, OptionError

pytestmark = pytest.mark.fuzz

REGISTRY = example_registry()
RAW = REGISTRY.batch("C", ts=[1, 5, 3, 9], key=[1, 2, 1, 2], v=[60, 70, 10, 80],
                     seq=[0, 1, 2, 3], ats=[1, 6, 7, 10])

# Values of every kind at and beyond the edges of every option.
values = st.one_of(
    st.sampled_from([None, True, False, 0, 1, 2, -1, 0.5, 1.5, float("nan"), float("inf"),
                     "adaptive", "full", "on-demand", "side", "process", "", "1", 2**63 - 1,
                     2**63, 2**64, 10**30, 1024, 1025, np.int8(3), np.uint64(2**64 - 1),
                     np.float32(0.3), np.float64("nan"), np.array([0.5, 0.2]),
                     np.array(["full", "side"]), np.array(3), [0.5], {"a": 1}, (1,),
                     b"full", 1j]),
    st.integers(), st.floats(), st.text(max_size=6))
options = st.dictionaries(st.sampled_from(sorted(NODE_OPTIONS)), values, max_size=3)
names = st.one_of(st.sampled_from(["c", "big_c", "a b", ""]), st.text(max_size=5),
                  st.sampled_from([None, 1, b"c", ("c",)]))
detectors = st.sampled_from([Threshold(), CountPerKey(), Threshold, None, "Threshold", 42])


def run(graph: Graph) -> None:
    """The declared graph runs on a few events. Only small graphs run: the in-process
    runtime takes ~20 ms per instance, so 1,000 partitions take seconds, not forever."""
    if sum(node.partitions for node in graph.nodes.values()) > 16:
        return
    with no_hang(20):
        result = InProcessRuntime(graph).run(RAW)
    for name in graph.nodes:
        result.net(name)


@budget(150)
@given(names, detectors, options)
def test_fuzz_graph_add(name, detector, given_options):
    graph = Graph(REGISTRY, sources=("C",))
    try:
        graph.add(name, detector, **given_options)
    except OptionError as exc:
        assert str(exc).startswith(f"{name}: ")
        assert any(f"{option} must be" in str(exc) for option in given_options), exc
        return
    except GraphError as exc:
        assert str(exc)
        assert detector is Threshold or not isinstance(detector, Threshold | CountPerKey) \
            or not (isinstance(name, str) and name), exc
        return
    run(graph)


@budget(100)
@given(options, st.one_of(st.none(), st.lists(names, max_size=2)))
def test_fuzz_graph_with_options(given_options, nodes):
    graph = Graph(REGISTRY, sources=("C",)).add("count", CountPerKey())
    try:
        changed = graph.with_options(nodes, **given_options)
    except OptionError as exc:
        assert str(exc).startswith("count: ")
        assert any(f"{option} must be" in str(exc) for option in given_options), exc
        return
    except GraphError as exc:
        assert "no detector named" in str(exc)
        return
    run(changed)


@budget(60)
@given(st.one_of(st.text(max_size=4), st.lists(st.one_of(st.sampled_from("ABCZ"), values),
                                               max_size=3), values))
def test_fuzz_graph_sources(sources):
    try:
        graph = Graph(REGISTRY, sources=sources).add("big", Threshold())
        graph.validate()
    except GraphError as exc:
        assert "source" in str(exc) or "nobody produces" in str(exc), exc
        return
    run(graph)


# ------------------------------------------------------------------ found by fuzzing


def test_k0_beyond_int64_is_refused_when_declared():
    """k0 = 2**63 was accepted, then failed the run with an OverflowError in the buffer."""
    graph = Graph(REGISTRY, sources=("C",))
    with pytest.raises(OptionError, match=r"^c: k0 must be an integer >= 0 and < 2\*\*63 "
                                          r"\(ticks\) or None; got 9223372036854775808$"):
        graph.add("c", Threshold(), k0=2**63)
    graph.add("c", Threshold(), k0=2**63 - 1)


def test_partitions_beyond_a_thousand_are_refused_when_declared():
    """partitions = 10**9 was accepted, and a run then built instances until memory ran
    out."""
    with pytest.raises(OptionError, match=r"^c: partitions must be an integer in 1\.\.1024; "
                                          "got 1000000000$"):
        Graph(REGISTRY, sources=("C",)).add("c", CountPerKey(), partitions=10**9)


def test_an_array_as_option_value_names_the_node_and_the_option():
    """alpha=np.array([0.5, 0.2]) raised NumPy's 'truth value of an array is ambiguous'."""
    graph = Graph(REGISTRY, sources=("C",))
    with pytest.raises(OptionError, match=r"^c: alpha must be a number in \[0, 1\] or "
                                          r"'adaptive'; got array\(\[0\.5, 0\.2\]\)$"):
        graph.add("c", Threshold(), alpha=np.array([0.5, 0.2]))
    with pytest.raises(OptionError, match=r"^c: retraction must be one of"):
        graph.add("c", Threshold(), retraction=np.array(["full", "side"]))


def test_sources_given_as_one_string_or_not_names_are_refused():
    """sources="ball" was the four sources b, a, l, l; sources=(3,) passed validation
    because 3 is a type id of the registry."""
    with pytest.raises(GraphError, match=r"^sources must be a collection of event type "
                                         r"names, got 'C'; e\.g\. sources=\('C',\)$"):
        Graph(REGISTRY, sources="C")
    with pytest.raises(GraphError, match=r"^sources must be event type names, got 3$"):
        Graph(REGISTRY, sources=(3,))
    with pytest.raises(GraphError, match=r"^sources must be a collection .* got array\(3\)"):
        Graph(REGISTRY, sources=np.array(3))  # found by the soak run


def test_a_detector_name_must_be_a_non_empty_string():
    """add(None, ...) and add("", ...) declared nodes without a usable name."""
    for name in (None, "", 1):
        with pytest.raises(GraphError, match="name must be a non-empty string"):
            Graph(REGISTRY, sources=("C",)).add(name, Threshold())
