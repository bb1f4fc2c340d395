"""Reading the DEBS 2013 Grand Challenge soccer data: positions, metadata, referee annotations.

The data set of the DEBS 2013 Grand Challenge was recorded by a real-time locating
system in a soccer game on a full-size pitch. It has three parts, and this package reads
all of them into the event model of :mod:`specula.events`:

* **Position readings** (``full-game.csv`` and samples of it): one line per sensor
  reading, 13 comma-separated integers ``sid, ts, x, y, z, |v|, |a|, vx, vy, vz, ax, ay,
  az`` (units in :mod:`specula.soccer.types`: picoseconds, millimetres,
  micrometres per second (squared), direction components scaled to length 10,000).
  :func:`read_positions` streams them as ``ball``, ``player`` and ``referee`` events in
  chunks of bounded size and sets aside malformed lines as :class:`Quarantined` records
  instead of failing the whole file, since one broken line among tens of millions
  should cost one reading, not the run. :func:`write_positions` writes events back in
  the same format, so that generated matches can be stored like the real one.
* **Metadata** (``metadata.txt``): which sensor ids are balls in which half, and which
  are worn by whom on which limb (:class:`Metadata`). The game's metadata is bundled
  (:meth:`Metadata.default`), so the reader works without the data directory.
* **Referee annotations** (``referee-events/``): game interruptions, shots on goal and
  ball possession per player, annotated by hand on the referee's clock
  (:func:`read_referee_events`).

Examples
--------
>>> import io
>>> data = io.BytesIO(b"4,10753295594424116,100,-200,0,0,0,0,0,0,0,0,0\\r\\n"
...                   b"4,oops,100,-200,0,0,0,0,0,0,0,0,0\\r\\n")
>>> events, quarantine = read_all(data)
>>> events["key"].tolist(), events["x"].tolist(), events["seq"].tolist()
([4], [100], [0])
>>> quarantine[0].line, quarantine[0].field, quarantine[0].reason
(2, 'ts', "not an integer ('oops')")
"""

from specula.soccer.debs2013._common import HALF_END_PS, HALF_START_PS
from specula.soccer.debs2013.metadata import (
    LEFT_ARM,
    LEFT_LEG,
    RIGHT_ARM,
    RIGHT_LEG,
    Metadata,
    Player,
    read_metadata,
)
from specula.soccer.debs2013.positions import (
    ACCELERATION_BOUND,
    DIRECTION_BOUND,
    MOTION_BOUNDS,
    POSITION_COLUMNS,
    RECORDING_PS,
    SPEED_BOUND,
    X_BOUNDS,
    Y_BOUNDS,
    Z_BOUNDS,
    PositionChunk,
    Quarantined,
    position_dtype,
    read_all,
    read_batches,
    read_positions,
    write_positions,
)
from specula.soccer.debs2013.referee import (
    INTERRUPTION_DTYPE,
    POSSESSION_DTYPE,
    SHOT_DTYPE,
    RefereeEvents,
    kickoff_aligned,
    read_referee_events,
)

__all__ = [
    "ACCELERATION_BOUND",
    "DIRECTION_BOUND",
    "HALF_END_PS",
    "HALF_START_PS",
    "INTERRUPTION_DTYPE",
    "LEFT_ARM",
    "LEFT_LEG",
    "MOTION_BOUNDS",
    "POSITION_COLUMNS",
    "POSSESSION_DTYPE",
    "RECORDING_PS",
    "RIGHT_ARM",
    "RIGHT_LEG",
    "SHOT_DTYPE",
    "SPEED_BOUND",
    "X_BOUNDS",
    "Y_BOUNDS",
    "Z_BOUNDS",
    "Metadata",
    "Player",
    "PositionChunk",
    "Quarantined",
    "RefereeEvents",
    "kickoff_aligned",
    "position_dtype",
    "read_all",
    "read_batches",
    "read_metadata",
    "read_positions",
    "read_referee_events",
    "write_positions",
]
