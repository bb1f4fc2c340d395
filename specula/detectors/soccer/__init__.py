"""The soccer domain: DEBS 2013 sensor events and the soccer detector hierarchy."""

from specula.detectors.soccer.types import POSITION_FIELDS, soccer_registry

__all__ = ["POSITION_FIELDS", "soccer_registry"]
