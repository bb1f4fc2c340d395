"""RI (random input shedding) and the ``shedding`` node option: what a shedder promises
(:class:`~specula.shedding.InputShedder`) and how a bad configuration is refused."""

from __future__ import annotations

import numpy as np
import pytest

from specula import Graph
from specula.detectors.examples import Threshold, example_registry
from specula.events import CORE_DTYPE
from specula.options import OptionError
from specula.shedding import (
    KEEP_ALL,
    DropCommand,
    InputShedder,
    RandomInput,
    Shedding,
    make_shedder,
)


def events(n: int, producer: int = 0) -> np.ndarray:
    batch = np.zeros(n, CORE_DTYPE)
    batch["seq"] = np.arange(n)
    batch["ts"] = np.arange(n) * 3
    batch["producer"] = producer
    return batch


@pytest.mark.parametrize("share", [0.05, 0.3, 0.5, 0.9])
def test_ri_drops_the_share_in_expectation(share):
    kept = RandomInput(seed=4).keep(events(40_000), DropCommand(share))
    assert kept.dtype == bool and len(kept) == 40_000
    # binomial: 4 standard deviations are < 0.011 at n = 40,000
    assert abs((1 - kept.mean()) - share) < 0.011


def test_ri_is_deterministic_and_independent_of_batch_cuts():
    batch, command = events(5_000, producer=3), DropCommand(0.4)
    whole = RandomInput(seed=9).keep(batch, command)
    rng = np.random.default_rng(0)
    cuts = np.sort(rng.choice(np.arange(1, 5_000), 40, replace=False))
    shedder = RandomInput(seed=9)
    pieces = np.concatenate([shedder.keep(p, command) for p in np.split(batch, cuts)])
    assert np.array_equal(whole, pieces)
    assert np.array_equal(whole, RandomInput(seed=9).keep(batch.copy(), command))
    assert not np.array_equal(whole, RandomInput(seed=10).keep(batch, command))
    # another producer's events with the same counters get other numbers
    assert not np.array_equal(whole, RandomInput(seed=9).keep(events(5_000, 4), command))


def test_ri_keeps_all_without_overload_and_drops_all_at_share_one():
    batch = events(1_000)
    assert RandomInput().keep(batch, KEEP_ALL).all()
    assert not RandomInput().keep(batch, DropCommand(1.0)).any()
    # a larger share drops a superset: the same numbers, a higher threshold
    low, high = (RandomInput(seed=2).keep(batch, DropCommand(s)) for s in (0.2, 0.6))
    assert not (high & ~low).any()


def test_make_shedder_builds_named_ones_and_copies_objects():
    assert isinstance(make_shedder(Shedding(latency_bound_s=1.0)), RandomInput)
    assert make_shedder(Shedding(latency_bound_s=1.0, seed=5)).seed == 5
    prototype = RandomInput(seed=7)
    copy = make_shedder(Shedding(latency_bound_s=1.0, strategy=prototype))
    assert copy is not prototype and copy.seed == 7
    assert isinstance(prototype, InputShedder)


@pytest.mark.parametrize("given, message", [
    ({"latency_bound_s": 0}, "Shedding: latency_bound_s must be a number of seconds > 0; "
                             "got 0"),
    ({"latency_bound_s": float("nan")}, "latency_bound_s must be a number of seconds > 0"),
    ({"latency_bound_s": "1s"}, "latency_bound_s must be a number of seconds > 0; got '1s'"),
    ({"latency_bound_s": 1, "f": 0}, "Shedding: f must be a number in (0, 1]; got 0"),
    ({"latency_bound_s": 1, "f": 1.5}, "f must be a number in (0, 1]; got 1.5"),
    ({"latency_bound_s": 1, "trigger": "rate"},
     "Shedding: trigger must be one of 'queue', 'latency'; got 'rate'"),
    ({"latency_bound_s": 1, "strategy": "espresso"},
     "Shedding: strategy must be one of 'random', 'detector' or an InputShedder object; "
     "got 'espresso'"),
    ({"latency_bound_s": 1, "strategy": object()}, "(with a keep(batch, command) method)"),
    ({"latency_bound_s": 1, "seed": -1}, "Shedding: seed must be an integer >= 0; got -1"),
    ({"latency_bound_s": 1, "smoothing": 0},
     "Shedding: smoothing must be an integer >= 1 (events); got 0"),
    ({"latency_bound_s": 1, "latency_quantile": 95},
     "Shedding: latency_quantile must be None (the mean) or a number in (0, 1]; got 95"),
])
def test_bad_settings_are_refused_with_what_is_valid(given, message):
    with pytest.raises(OptionError) as info:
        Shedding(**given)
    assert message in str(info.value)


def test_graph_takes_shedding_per_node_and_checks_it():
    g = Graph(example_registry(), sources=("C",))
    bound = Shedding(latency_bound_s=0.25, f=0.5)
    g.add("big_c", Threshold(), shedding=bound).add("all_c", Threshold(limit=0))
    assert g.nodes["big_c"].shedding is bound and g.nodes["all_c"].shedding is None
    with pytest.raises(OptionError, match=r"^x: shedding must be None or a "
                                          r"Shedding\(latency_bound_s=\.\.\.\)"):
        g.add("x", Threshold(), shedding={"latency_bound_s": 1})
    copy = g.with_options(["all_c"], shedding=bound)
    assert copy.nodes["all_c"].shedding is bound and g.nodes["all_c"].shedding is None
    assert bound.describe() == {"latency_bound_s": 0.25, "f": 0.5, "trigger": "queue",
                                "strategy": "random", "seed": 0, "smoothing": 1000,
                                "latency_quantile": None}
    assert Shedding(1.0, strategy=RandomInput()).describe()["strategy"] == "RandomInput"
