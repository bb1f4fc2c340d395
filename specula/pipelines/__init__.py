"""Declaring detector graphs and running them (in-process, or on Ray)."""

from specula.pipelines.graph import Graph, GraphError, Instance, Node
from specula.pipelines.inprocess import CostModel, InProcessRuntime
from specula.pipelines.report import DetectorReport, RunReport

__all__ = [
    "CostModel",
    "DetectorReport",
    "Graph",
    "GraphError",
    "InProcessRuntime",
    "Instance",
    "Node",
    "RunReport",
]
