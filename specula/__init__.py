"""Specula: low-latency complex event processing over out-of-order event streams.

A graph of detectors, each wrapped by a speculative K-slack ordering unit. The names a
first program needs are here: declare types on a :class:`TypeRegistry`, write a
:class:`Detector`, wire detectors into a :class:`Graph` and run it with
:class:`InProcessRuntime` or, on Ray, :class:`RayRuntime`: both take the same ``run()``
arguments, and their options are in :data:`specula.options.RUNTIME_OPTIONS`.
"""

from specula.actors import InProcessRuntime, RayRuntime, RunReport
from specula.detectors import Detector, Emitter, EventView, Graph, GraphError
from specula.events import TypeRegistry
from specula.options import CostModel, OptionError
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
    "OptionError",
    "OrderingUnit",
    "RayRuntime",
    "RunReport",
    "TypeRegistry",
]
__version__ = "0.1.0"
