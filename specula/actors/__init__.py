"""Running a graph: the detector actor (inbox -> ordering unit -> detector -> publisher),
routing between instances, the in-process runtime on a virtual clock, the Ray runtime
(one actor per detector instance) and the run report."""

from specula.actors.inprocess import CostModel, InProcessRuntime
from specula.actors.report import DetectorReport, RunReport
from specula.actors.worker import DetectorWorker

__all__ = ["CostModel", "DetectorReport", "DetectorWorker", "InProcessRuntime", "RunReport"]
