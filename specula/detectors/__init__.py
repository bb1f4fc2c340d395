"""Detectors: the contract users implement (and, later, the rule engines and the soccer
library). Knows nothing of Ray or Spark."""

from specula.detectors.base import Detector, Emitter, EventView

__all__ = ["Detector", "Emitter", "EventView"]
