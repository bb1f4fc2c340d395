"""Specula: low-latency complex event processing over out-of-order event streams.

A graph of detectors, each wrapped by a speculative K-slack ordering unit. The names a
first program needs are here: declare types on a :class:`TypeRegistry`, write a
:class:`Detector`, wire detectors into a :class:`Graph` and run it with
:class:`InProcessRuntime` (or :class:`~specula.actors.ray_runtime.RayRuntime` on Ray).
"""

from specula.actors import CostModel, InProcessRuntime, RunReport
from specula.detectors import Detector, Emitter, EventView, Graph, GraphError
from specula.events import TypeRegistry
from specula.ordering import AlphaController, OrderingUnit

__all__ = [
    "AlphaController",
    "CostModel",
    "Detector",
    "Emitter",
    "EventView",
    "Graph",
    "GraphError",
    "InProcessRuntime",
    "OrderingUnit",
    "RunReport",
    "TypeRegistry",
]
__version__ = "0.1.0"
