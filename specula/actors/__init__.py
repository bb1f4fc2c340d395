"""Ray actors: a detector instance is inbox -> ordering unit -> detector -> publisher."""

from specula.actors.detector import DetectorWorker

__all__ = ["DetectorWorker"]
