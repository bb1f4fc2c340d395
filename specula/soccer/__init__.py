"""The soccer domain: DEBS 2013 sensor events, logs and metadata, the match generator,
the detector hierarchy and scoring against a match's ground truth. Built on the generic
rooms; none of them imports it."""

from specula.soccer.types import POSITION_FIELDS, soccer_registry

__all__ = ["POSITION_FIELDS", "soccer_registry"]
