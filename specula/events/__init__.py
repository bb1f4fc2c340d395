"""Event model: batches of events as NumPy structured arrays, typed payloads, codec.

Every component of the system (ordering units, detectors, sinks) exchanges events in
*batches*: one-dimensional NumPy structured arrays whose first fields are the core
fields in :data:`CORE_FIELDS`, followed by payload columns. Payload columns are
declared per event type in a :class:`TypeRegistry`; a batch that carries several
types has the union of their payload columns, and a row leaves the columns of other
types at zero. Keeping events columnar lets the ordering and detection kernels work
on whole arrays instead of Python objects.

The core fields carry what speculative out-of-order processing needs:

* ``ts`` is the occurrence time stamp the ordering units sort by, ``ats`` the
  arrival time stamp at the receiving unit and ``origin`` the arrival time of the
  newest raw event an event depends on, so that detection latency is
  ``ats - origin`` at the sink;
* ``producer`` and ``seq`` identify an event emitted by a detector, so that a later
  counter message can retract it (flag :data:`RETRACTION`: retract every live event
  of ``producer`` with a sequence number ``>= seq``; flag :data:`REVOKE`: revoke
  exactly this one) or replace it (flag :data:`UPDATE`);
* ``kplus`` (K+) says how prematurely the cause of a derived event was emitted
  (Mutschler & Philippsen, DEBS 2013, sec. 4.1); it is 0 for raw events.

Construction validates input (:class:`InvalidEvent` names the record, the field and
the reason) because a single malformed event would otherwise corrupt the ordering
state far away from where it entered. Two msgpack codecs are provided: a per-event
map for external interfaces and a raw columnar form for batches, which round-trips
arrays byte for byte.

A type id means something only in its registry. :meth:`TypeRegistry.fingerprint`
digests the registry's (id, name, fields) table and time unit; :func:`type_table`
checks events made with one registry against another and translates their ids by
name, or raises :class:`RegistryMismatchError` naming the type that does not match.

Examples
--------
>>> import numpy as np
>>> registry = TypeRegistry()
>>> kick = registry.register("kick", speed=np.float64, foot=np.int8)
>>> kick.id
1
>>> events = registry.batch("kick", ts=[10, 20], key=7, speed=[3.5, 4.0])
>>> events["ts"].tolist(), events["key"].tolist(), events["foot"].tolist()
([10, 20], [7, 7], [0, 0])
>>> bool((decode_batch(encode_batch(events)) == events).all())
True
"""

from specula.events.batches import (
    SameDtype,
    check_raw,
    concat,
    concat_records,
    conform,
    distinct,
    empty,
    select_records,
    stamp_arrival,
    validate_batch,
    validate_raw,
)
from specula.events.codec import (
    batch_registry,
    decode_batch,
    decode_event,
    encode_batch,
    encode_event,
)
from specula.events.core import (
    CONTROL,
    CORE_DTYPE,
    CORE_FIELDS,
    LATE,
    PROGRESS,
    RETRACTION,
    REVOKE,
    UPDATE,
    InvalidEvent,
    fields_of,
)
from specula.events.registry import EventType, TypeRegistry
from specula.events.translate import RegistryMismatchError, translate_types, type_table

__all__ = [
    "CONTROL",
    "CORE_DTYPE",
    "CORE_FIELDS",
    "LATE",
    "PROGRESS",
    "RETRACTION",
    "REVOKE",
    "UPDATE",
    "EventType",
    "InvalidEvent",
    "RegistryMismatchError",
    "SameDtype",
    "TypeRegistry",
    "batch_registry",
    "check_raw",
    "concat",
    "concat_records",
    "conform",
    "decode_batch",
    "decode_event",
    "distinct",
    "empty",
    "encode_batch",
    "encode_event",
    "fields_of",
    "select_records",
    "stamp_arrival",
    "translate_types",
    "type_table",
    "validate_batch",
    "validate_raw",
]
