"""Specula: low-latency complex event processing over out-of-order event streams.

A graph of detectors, each wrapped by a speculative K-slack ordering unit.
"""

from specula.detectors import Detector
from specula.events import TypeRegistry
from specula.ordering import AlphaController, OrderingUnit
from specula.pipelines import CostModel, Graph, InProcessRuntime

__all__ = [
    "AlphaController",
    "CostModel",
    "Detector",
    "Graph",
    "InProcessRuntime",
    "OrderingUnit",
    "TypeRegistry",
]
__version__ = "0.1.0"
