"""Fuzzing the event model's entrances: constructors, records, batch checks, msgpack.

Whatever comes in (bytes off a wire, a decoded map, columns of any kind), the answer is
a valid batch or event, or a ValueError whose message says what is wrong; for a record
it is an :class:`InvalidEvent` naming the record and the field. Never another exception
type, never a batch that holds something other than what was given. The round trips of
valid events and batches are in ``tests/test_events.py``.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest
from fuzzing import budget
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from specula import events as ev
from specula.events import (
    InvalidEvent,
    TypeRegistry,
    batch_registry,
    decode_batch,
    decode_event,
    encode_batch,
    encode_event,
)

pytestmark = pytest.mark.fuzz


def registry() -> TypeRegistry:
    reg = TypeRegistry(ticks_per_second=1e12)
    reg.register("pos", x="f4", y="f8", team="i2")
    reg.register("kick", hard="?", n="u8")
    return reg


REGISTRY = registry()
FIELD_NAMES = ["type", "ts", "key", "producer", "seq", "kplus", "flags", "ats", "origin",
               "x", "y", "team", "hard", "n", "v", "fields", "data", "types", ""]

# Values msgpack can carry: what a hostile or broken peer can send.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(),
                    st.text(max_size=8), st.binary(max_size=16))
wire_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)
# Numbers at and beyond the edges of every field's dtype.
EDGES = [0, 1, -1, 31, 32, 2**15, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63),
         0.5, 2.0, 1e39, -0.0, float("nan"), float("inf"), True, "1", b"1", None, [1],
         {"a": 1}]
wire_field_values = st.one_of(st.sampled_from(EDGES), scalars)
field_values = st.one_of(st.sampled_from([*EDGES, np.int64(-1), np.uint64(2**64 - 1),
                                          np.float32(3.5), np.float64(1e300)]), scalars)


def records(field_values: st.SearchStrategy[Any] = field_values) -> st.SearchStrategy[Any]:
    record = st.dictionaries(st.sampled_from(FIELD_NAMES), field_values, max_size=8)
    typed = st.builds(lambda r, t, ts: {**r, "type": t, "ts": ts}, record,
                      st.sampled_from(["pos", "kick", "goal", 1, 2, 3, 0, True, 1.0]),
                      field_values)
    return st.one_of(typed, record, field_values)


# ------------------------------------------------------------------ constructors


@budget(300)
@given(st.lists(records(), max_size=5))
def test_fuzz_from_records(items):
    try:
        batch = REGISTRY.from_records(items)
    except InvalidEvent as exc:
        assert exc.record is not None and 0 <= exc.record < len(items)
        assert str(exc).startswith(f"record {exc.record}")
        assert exc.field is None or exc.field in items[exc.record] or exc.reason == "missing"
        assert exc.reason
        return
    assert len(batch) == len(items)
    for row, item in zip(batch, items, strict=True):
        for name, value in item.items():
            if name != "type":
                assert row[name] == value or (value != value and row[name] != row[name])


column_arrays = hnp.arrays(st.sampled_from(["i1", "i8", "u1", "u8", "f2", "f4", "f8", "?",
                                            "c8", "U3", "O", "M8[s]"]),
                           st.integers(0, 4), elements=None)
columns = st.one_of(field_values, st.lists(field_values, max_size=4), column_arrays,
                    hnp.arrays("i8", st.tuples(st.integers(0, 2), st.integers(0, 2))))


@budget(300)
@given(st.sampled_from(["pos", "kick"]),
       st.dictionaries(st.sampled_from(FIELD_NAMES[2:]), columns, max_size=5), columns)
def test_fuzz_batch_columns(type_name, given_columns, ts):
    try:
        batch = REGISTRY.batch(type_name, ts=ts, **given_columns)
    except InvalidEvent as exc:
        assert exc.field in [*given_columns, "ts"]
        assert exc.reason
        return
    except ValueError as exc:  # lengths that do not broadcast, a column of 2 dimensions
        assert "broadcast" in str(exc) or "one-dimensional" in str(exc)
        return
    assert (batch["type"] == REGISTRY.id(type_name)).all()
    for name, values in {"ts": ts, **given_columns}.items():
        stored = np.broadcast_to(np.asarray(values), batch.shape) if batch.size else values
        if batch.size:
            assert ((batch[name] == stored) | (stored != stored)).all(), name


dtype_specs = st.one_of(st.sampled_from(["i4", "<f8", ">i2", "?", "u8", "f16", "c8", "U4",
                                         "O", "i4,i4", "(2,)i4", "M8", "V8", "S3", ""]),
                        st.text(max_size=6), st.integers(-2, 2))


@budget(200)
@given(st.one_of(st.text(max_size=6), st.integers(), st.none()),
       st.dictionaries(st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=6)),
                       dtype_specs, max_size=3))
def test_fuzz_register(name, fields):
    reg = registry()
    try:
        etype = reg.register(name, **fields)
    except ValueError as exc:
        assert str(exc)
        return
    assert reg[name] is etype and reg.dtype([name]).names[-len(fields) or None:]


@budget(100)
@given(hnp.arrays(np.dtype([("type", "f8"), ("flags", "i8"), ("ts", "i8")]),
                  st.integers(0, 8)))
def test_fuzz_validate_batch(batch):
    bad, errors = ev.validate_batch(batch, REGISTRY)
    assert len(bad) == len(batch)
    assert {e.record for e in errors} == set(np.flatnonzero(bad).tolist())


# ------------------------------------------------------------------ msgpack


def check_decode(data: bytes) -> None:
    """Decoding ``data`` gives a batch, an event or a registry, or a ValueError."""
    for decode in (decode_batch, batch_registry, lambda d: decode_event(d, REGISTRY)):
        try:
            decode(data)
        except ValueError as exc:
            assert str(exc)


@budget(200)
@given(st.binary(max_size=64))
def test_fuzz_decode_bytes(data):
    check_decode(data)


@budget(300)
@given(st.dictionaries(st.sampled_from(["v", "fields", "n", "data", "types", "x"]),
                       st.one_of(wire_values, st.sampled_from(
                           [1, [["ts", "<i8"]], [["a", "<f4"], ["b", "?"]], b"\0" * 8,
                            b"\2" * 5, {"ticks_per_second": 1.0, "types": [["a", []]]},
                            {"ticks_per_second": 0, "types": [[1, [["ts", "i8"]]]]}])),
                       max_size=6))
def test_fuzz_decode_batch_messages(message):
    check_decode(msgpack.packb(message, use_bin_type=True))


@budget(200)
@given(st.data())
def test_fuzz_decode_damaged_batch(data):
    batch = REGISTRY.batch("pos", ts=[1, 2, 3], x=[0.5, 1, 2], team=7)
    encoded = bytearray(encode_batch(batch, REGISTRY))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(encoded) - 1))
        encoded[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(encoded)))
    check_decode(bytes(encoded[:cut]))
    check_decode(bytes(encoded))


@budget(300)
@given(records(wire_field_values))
def test_fuzz_event_codec(record):
    """A map decodes to the event it describes, or an InvalidEvent naming its field."""
    try:
        event = decode_event(msgpack.packb(record, use_bin_type=True), REGISTRY)
    except InvalidEvent as exc:
        assert exc.record is None and exc.reason
        assert exc.field is None or exc.field in record or exc.reason == "missing"
        return
    except ValueError as exc:  # not a map at all
        assert not isinstance(record, dict) and "msgpack map" in str(exc)
        return
    assert decode_event(encode_event(event, REGISTRY), REGISTRY) == event
