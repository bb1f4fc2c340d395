"""Declaring detector graphs and running them (in-process here; on Ray and Spark later)."""

from specula.pipelines.graph import Graph, GraphError, Node
from specula.pipelines.inprocess import CostModel, InProcessRuntime, RunResult

__all__ = ["CostModel", "Graph", "GraphError", "InProcessRuntime", "Node", "RunResult"]
