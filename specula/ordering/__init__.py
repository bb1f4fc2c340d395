"""Speculative K-slack ordering: buffers, clock extraction, dynamic K, snapshots, replay,
retraction and runtime alpha-adaptation. Knows nothing of Ray, Spark or soccer."""

from specula.ordering.adaptation import AlphaController, AlphaSample, ManualClock
from specula.ordering.net import NetOutput
from specula.ordering.unit import OrderingUnit, TraceEntry, UnitStats

__all__ = [
    "AlphaController",
    "AlphaSample",
    "ManualClock",
    "NetOutput",
    "OrderingUnit",
    "TraceEntry",
    "UnitStats",
]
