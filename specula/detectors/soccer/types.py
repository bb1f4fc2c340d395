"""Event types of the soccer domain (DEBS 2013 Grand Challenge units).

Raw position events come from the real-time locating system: one row per sensor
reading, ``sid, ts, x, y, z, |v|, |a|, vx, vy, vz, ax, ay, az``. Time stamps are in
picoseconds, positions in millimetres, ``|v|`` in micrometres per second, ``|a|`` in
micrometres per second squared, and the direction components are scaled so that the
vector has length 10,000. The sensor id is the event key. A reading becomes a ``ball``,
``player`` or ``referee`` event by what the sensor is attached to (the metadata).
"""

from __future__ import annotations

from specula.events import TypeRegistry

PICOS_PER_SECOND = 10**12

#: Payload of every position event, in DEBS 2013 units.
POSITION_FIELDS = {
    "x": "i8", "y": "i8", "z": "i8",  # mm
    "v": "i8",  # |v|, um/s
    "a": "i8",  # |a|, um/s^2
    "vx": "i4", "vy": "i4", "vz": "i4",  # direction of v, scaled to length 10,000
    "ax": "i4", "ay": "i4", "az": "i4",  # direction of a, scaled to length 10,000
}

#: Extra payload of player and referee readings: who wears the sensor, and where.
WEARER_FIELDS = {
    "player": "i4",  # player id (index in the metadata), -1 for the referee
    "team": "i1",  # 0 = team A, 1 = team B, -1 = referee
    "limb": "i1",  # 0 left leg, 1 right leg, 2 left arm, 3 right arm
}


def soccer_registry() -> TypeRegistry:
    """A registry with the raw soccer types ``ball``, ``player`` and ``referee``."""
    reg = TypeRegistry()
    reg.register("ball", **POSITION_FIELDS)
    reg.register("player", **POSITION_FIELDS, **WEARER_FIELDS)
    reg.register("referee", **POSITION_FIELDS, **WEARER_FIELDS)
    return reg
