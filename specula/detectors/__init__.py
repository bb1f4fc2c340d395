"""Detectors: the contract users implement, graph declaration, example detectors and the
rule language with its engines (:mod:`specula.detectors.rules`). Knows nothing of Ray,
Spark or any domain."""

from specula.detectors.base import Detector, type_ids
from specula.detectors.graph import Graph, GraphError, Instance, Node
from specula.ordering.emitter import Emitter, EventView

__all__ = ["Detector", "Emitter", "EventView", "Graph", "GraphError", "Instance", "Node",
           "type_ids"]
