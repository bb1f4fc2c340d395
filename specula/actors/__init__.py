"""Running a graph: the detector actor (inbox -> ordering unit -> detector -> publisher),
routing between instances, the in-process runtime on a virtual clock, the Ray runtime
(detector instances in chain actors, one or several per process) and the run report.
Both runtimes take the options of :data:`specula.options.RUNTIME_OPTIONS` and the same
``run()`` arguments."""

from specula.actors.inprocess import InProcessRuntime
from specula.actors.ray_runtime import RayRuntime
from specula.actors.report import DetectorReport, RunReport
from specula.actors.worker import DetectorWorker

__all__ = ["DetectorReport", "DetectorWorker", "InProcessRuntime", "RayRuntime", "RunReport"]
