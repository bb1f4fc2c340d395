"""An actor warms its unit's Numba kernels before the stream (``Instance.warm_up``), so
that no push of the stream waits for one to load: not the read-only batches Ray hands
an actor, and not the one-row batches (a lone punctuation, a lone event) whose fields
Numba types as contiguous where longer batches' are strided."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from numba.core.registry import CPUDispatcher

from specula import InProcessRuntime
from specula.ordering.unit import OrderingUnit
from specula.pipelines.delays import DelayModel
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match


def _signatures() -> dict[str, int]:
    """Types compiled or loaded so far, per Numba kernel of specula."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("specula"):
            for attr, obj in vars(module).items():
                if isinstance(obj, CPUDispatcher):
                    found[f"{name}.{attr}"] = len(obj.signatures)
    return found


def test_warmed_units_load_no_kernel_on_read_only_pushes(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    match = generate_match(2.0, seed=3)
    raw = DelayModel(seed=3).arrival(match.stream())
    graph = soccer_graph(1.0, metadata=match.metadata)
    # the runtime's own kernels (routing, net output), which no actor runs, load here
    InProcessRuntime(graph).run(raw)
    for instance in graph.instances():
        instance.warm_up(graph.registry)
    before = _signatures()

    push = OrderingUnit.push
    pushed = {"one_row": 0, "longer": 0}

    def read_only_push(self: OrderingUnit, batch: np.ndarray, now: int = 0) -> np.ndarray:
        batch = batch.copy()
        batch.flags.writeable = False  # as Ray delivers it
        pushed["one_row" if len(batch) == 1 else "longer"] += 1
        return push(self, batch, now)

    monkeypatch.setattr(OrderingUnit, "push", read_only_push)
    InProcessRuntime(graph).run(raw)
    assert pushed["one_row"] and pushed["longer"]
    after = _signatures()
    loaded = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert loaded == {}


def test_every_node_warms_up_on_long_and_one_row_batches_writeable_and_read_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each actor is a process of its own, with only its node's kernels loaded: the
    warm-up must push every kind of batch for every node, even one with a single input
    type and no producer."""
    match = generate_match(1.0, seed=3)
    graph = soccer_graph(1.0, metadata=match.metadata)
    push = OrderingUnit.push
    kinds: set[tuple[bool, bool]] = set()

    def record(self: OrderingUnit, batch: np.ndarray, now: int = 0) -> np.ndarray:
        kinds.add((len(batch) > 1, bool(batch.flags.writeable)))
        return push(self, batch, now)

    monkeypatch.setattr(OrderingUnit, "push", record)
    for instance in graph.instances():
        kinds.clear()
        instance.warm_up(graph.registry)
        assert kinds == {(True, True), (True, False), (False, True), (False, False)}, \
            instance.label
