"""Tests for the event model: type registry, validated construction, batch tools, codec."""

from __future__ import annotations

import math
import pickle
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from specula.events import (
    CORE_DTYPE,
    CORE_FIELDS,
    LATE,
    RETRACTION,
    UPDATE,
    EventType,
    InvalidEvent,
    TypeRegistry,
    concat,
    conform,
    decode_batch,
    decode_event,
    empty,
    encode_batch,
    encode_event,
    validate_batch,
)

CORE_NAMES = [name for name, _ in CORE_FIELDS]

# Payload dtypes the registry accepts; the codec tests draw from all of them.
PAYLOAD_DTYPES = [
    np.dtype(code)
    for code in ("?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8")
]


def _registry() -> TypeRegistry:
    registry = TypeRegistry()
    registry.register("pos", x=np.float32, y=np.float32, zone=np.int16)
    registry.register("kick", speed=np.float64, foot=np.int8, hard=np.bool_)
    registry.register("count", n=np.uint64, zone=np.int16, big=np.int64)
    return registry


@pytest.fixture
def registry() -> TypeRegistry:
    return _registry()


def _invalid(excinfo: pytest.ExceptionInfo[InvalidEvent]) -> tuple[Any, Any, str]:
    exc = excinfo.value
    return exc.record, exc.field, exc.reason


# --------------------------------------------------------------------------- constants


def test_core_dtype_has_the_specified_fields_in_order() -> None:
    assert CORE_DTYPE.names == (
        "ts",
        "type",
        "key",
        "producer",
        "seq",
        "kplus",
        "flags",
        "ats",
        "origin",
    )
    expected = [np.int64, np.int32, np.int64, np.int32, np.int64, np.int64, np.uint8]
    expected += [np.int64, np.int64]
    assert [CORE_DTYPE[name] for name in CORE_DTYPE.names] == [np.dtype(t) for t in expected]
    assert CORE_DTYPE.itemsize == 8 * 6 + 4 * 2 + 1


def test_flag_values() -> None:
    assert (RETRACTION, UPDATE, LATE) == (1, 2, 4)
    assert all(type(flag) is int for flag in (RETRACTION, UPDATE, LATE))


# --------------------------------------------------------------------------- registry


def test_register_assigns_increasing_ids_from_one(registry: TypeRegistry) -> None:
    assert [t.id for t in registry] == [1, 2, 3]
    assert [t.name for t in registry.types()] == ["pos", "kick", "count"]
    assert len(registry) == 3
    pos = registry["pos"]
    assert isinstance(pos, EventType)
    assert pos.fields == (
        ("x", np.dtype(np.float32)),
        ("y", np.dtype(np.float32)),
        ("zone", np.dtype(np.int16)),
    )
    assert pos.field_names == ("x", "y", "zone")


def test_event_type_is_frozen(registry: TypeRegistry) -> None:
    with pytest.raises(AttributeError):
        registry["pos"].id = 5  # type: ignore[misc]


def test_lookup_by_name_and_id(registry: TypeRegistry) -> None:
    assert registry.id("kick") == 2
    assert registry.name(3) == "count"
    assert registry.name(np.int32(1)) == "pos"
    assert "kick" in registry
    assert 2 in registry
    assert np.int32(3) in registry
    assert "nope" not in registry
    assert 0 not in registry
    assert 4 not in registry
    assert True not in registry
    with pytest.raises(KeyError, match="nope"):
        registry["nope"]
    with pytest.raises(KeyError):
        registry.id("nope")
    with pytest.raises(KeyError):
        registry.name(0)
    with pytest.raises(KeyError):
        registry.name(4)


def test_register_same_fields_twice_returns_existing(registry: TypeRegistry) -> None:
    again = registry.register("pos", x=np.float32, y="f4", zone="i2")
    assert again is registry["pos"]
    assert len(registry) == 3


def test_register_same_name_different_fields_raises(registry: TypeRegistry) -> None:
    with pytest.raises(ValueError, match="'pos' is already registered"):
        registry.register("pos", x=np.float64, y=np.float32, zone=np.int16)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("pos", x=np.float32)
    assert len(registry) == 3


def test_shared_field_needs_same_dtype(registry: TypeRegistry) -> None:
    # "zone" is shared by pos and count with the same dtype: fine.
    assert registry["count"].fields[1] == ("zone", np.dtype(np.int16))
    with pytest.raises(ValueError) as excinfo:
        registry.register("area", zone=np.int32)
    message = str(excinfo.value)
    assert "'area'" in message and "'pos'" in message and "zone" in message
    assert "area" not in registry


@pytest.mark.parametrize("field", CORE_NAMES)
def test_payload_field_may_not_collide_with_core(field: str) -> None:
    registry = TypeRegistry()
    with pytest.raises(ValueError, match="core field"):
        registry.register("bad", **{field: np.int64})
    assert len(registry) == 0


@pytest.mark.parametrize("spec", ["U4", "S3", object, "M8[ns]", "c8", np.longdouble, "i4,i4"])
def test_non_numeric_field_dtypes_are_rejected(spec: Any) -> None:
    registry = TypeRegistry()
    with pytest.raises(ValueError, match="must be bool, integer or float"):
        registry.register("bad", value=spec)


def test_unknown_dtype_spec_and_bad_names_are_rejected() -> None:
    registry = TypeRegistry()
    with pytest.raises(ValueError, match="unknown dtype"):
        registry.register("bad", value="not-a-dtype")
    with pytest.raises(ValueError, match="non-empty"):
        registry.register("")
    with pytest.raises(ValueError, match="identifier"):
        registry.register("bad", **{"two words": "i4"})
    with pytest.raises(ValueError, match="reserved"):
        registry.register("bad", dtype="i4")
    assert len(registry) == 0


def test_field_named_name_is_allowed() -> None:
    registry = TypeRegistry()
    etype = registry.register("labelled", name=np.int32)
    assert etype.fields == (("name", np.dtype(np.int32)),)


def test_payload_dtype_is_native_byte_order() -> None:
    registry = TypeRegistry()
    etype = registry.register("be", value=">i8")
    assert etype.fields[0][1] == np.dtype(np.int64)
    assert etype.fields[0][1].isnative


# ------------------------------------------------------------------------------ dtype


def test_dtype_is_core_plus_payload_union_in_registration_order(registry: TypeRegistry) -> None:
    full = registry.dtype()
    assert full.names == (*CORE_NAMES, "x", "y", "zone", "speed", "foot", "hard", "n", "big")
    assert full["zone"] == np.dtype(np.int16)
    assert full["hard"] == np.dtype(np.bool_)
    # The order of the requested names does not matter, only registration order.
    subset = registry.dtype(["count", "pos"])
    assert subset.names == (*CORE_NAMES, "x", "y", "zone", "n", "big")
    assert registry.dtype(["kick"]).names == (*CORE_NAMES, "speed", "foot", "hard")
    assert registry.dtype([]) == CORE_DTYPE
    for name in CORE_NAMES:
        assert full[name] == CORE_DTYPE[name]


def test_dtype_is_cached(registry: TypeRegistry) -> None:
    assert registry.dtype(["pos", "kick"]) is registry.dtype(("kick", "pos", "kick"))
    assert registry.dtype() is registry.dtype()
    before = registry.dtype()
    registry.register("late_type", extra=np.float64)
    after = registry.dtype()
    assert after is not before
    assert after.names[-1] == "extra"
    assert "extra" not in before.names
    # A cached subset is unaffected by later registrations.
    assert registry.dtype(["pos"]).names[-1] == "zone"


def test_dtype_rejects_unknown_names_and_plain_strings(registry: TypeRegistry) -> None:
    with pytest.raises(KeyError):
        registry.dtype(["pos", "nope"])
    with pytest.raises(TypeError):
        registry.dtype("pos")


# ------------------------------------------------------------------------------ batch


def test_batch_broadcasts_scalars_and_defaults_to_zero(registry: TypeRegistry) -> None:
    events = registry.batch("pos", ts=[3, 1, 2], key=9, x=[0.5, 1.5, 2.5], zone=np.int16(4))
    assert events.dtype == registry.dtype(["pos"])
    assert events["ts"].tolist() == [3, 1, 2]
    assert events["type"].tolist() == [1, 1, 1]
    assert events["key"].tolist() == [9, 9, 9]
    assert events["x"].tolist() == [0.5, 1.5, 2.5]
    assert events["y"].tolist() == [0.0, 0.0, 0.0]
    assert events["zone"].tolist() == [4, 4, 4]
    for name in ("producer", "seq", "kplus", "flags", "ats", "origin"):
        assert events[name].tolist() == [0, 0, 0], name


def test_batch_sets_core_columns(registry: TypeRegistry) -> None:
    events = registry.batch(
        "kick",
        ts=np.array([10, 20]),
        producer=3,
        seq=[7, 8],
        kplus=5,
        flags=[RETRACTION, UPDATE | LATE],
        ats=np.array([11, 21]),
        origin=9,
        speed=2.0,
        foot=np.array([1, -1], dtype=np.int64),
        hard=[True, False],
    )
    assert events["producer"].tolist() == [3, 3]
    assert events["seq"].tolist() == [7, 8]
    assert events["kplus"].tolist() == [5, 5]
    assert events["flags"].tolist() == [1, 6]
    assert events["ats"].tolist() == [11, 21]
    assert events["origin"].tolist() == [9, 9]
    assert events["foot"].tolist() == [1, -1]
    assert events["hard"].tolist() == [True, False]


def test_batch_of_scalars_has_one_event_and_empty_ts_none(registry: TypeRegistry) -> None:
    assert len(registry.batch("pos", ts=5)) == 1
    assert registry.batch("pos", ts=5)["ts"].tolist() == [5]
    events = registry.batch("pos", ts=[], key=3, x=1.0)
    assert len(events) == 0
    assert events.dtype == registry.dtype(["pos"])
    # Length-one columns broadcast like NumPy arrays.
    assert registry.batch("pos", ts=[1, 2], key=[4])["key"].tolist() == [4, 4]


def test_batch_into_wider_dtype(registry: TypeRegistry) -> None:
    wide = registry.dtype()
    events = registry.batch("count", ts=[1, 2], n=[2**64 - 1, 0], dtype=wide)
    assert events.dtype is wide
    assert events["n"].tolist() == [2**64 - 1, 0]
    assert events["speed"].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="lacks field 'n'"):
        registry.batch("count", ts=1, dtype=registry.dtype(["pos"]))


def test_batch_rejects_unknown_fields(registry: TypeRegistry) -> None:
    with pytest.raises(InvalidEvent) as excinfo:
        registry.batch("pos", ts=1, speed=2.0)
    assert _invalid(excinfo) == (None, "speed", "not a field of type 'pos'")
    with pytest.raises(InvalidEvent) as excinfo:
        registry.batch("pos", ts=1, type=2)
    assert excinfo.value.field == "type"
    with pytest.raises(KeyError):
        registry.batch("nope", ts=1)


def test_batch_shape_errors(registry: TypeRegistry) -> None:
    with pytest.raises(ValueError, match="do not broadcast"):
        registry.batch("pos", ts=[1, 2], key=[1, 2, 3])
    with pytest.raises(ValueError, match="one-dimensional"):
        registry.batch("pos", ts=np.zeros((2, 2), dtype=np.int64))


@pytest.mark.parametrize(
    ("column", "values", "record", "reason"),
    [
        ("ts", [1, 2.0], 1, "not an integer (2.0)"),
        ("ts", np.array([1.0, 2.0]), 0, "not an integer (1.0)"),
        ("ts", [0, True], 1, "not an integer (True)"),
        ("ts", [2**63], 0, "out of range for int64 (9223372036854775808)"),
        (
            "ts",
            np.array([0, 2**63], dtype=np.uint64),
            1,
            "out of range for int64 (9223372036854775808)",
        ),
        ("zone", np.array([1, 40000]), 1, "out of range for int16 (40000)"),
        ("zone", [1, 2, 1.5], 2, "not an integer (1.5)"),
        ("zone", np.array([1.0, np.nan]), 1, "not an integer (nan)"),
        ("x", np.array([1.0, 1e300]), 1, "overflows float32 (1e+300)"),
        ("x", ["a"], 0, "not a number ('a')"),
        ("x", np.array([2**24 + 1]), 0, "not exactly representable as float32 (16777217)"),
        ("flags", np.array([0, 31, 32]), 2, "out of range 0..31 (32)"),
        ("flags", [33], 0, "out of range 0..31 (33)"),
    ],
)
def test_batch_validates_columns(
    registry: TypeRegistry, column: str, values: Any, record: int, reason: str
) -> None:
    columns = {"ts": 0, column: values}
    with pytest.raises(InvalidEvent) as excinfo:
        registry.batch("pos", **columns)
    assert _invalid(excinfo) == (record, column, reason)


def test_batch_scalar_errors_have_no_record(registry: TypeRegistry) -> None:
    with pytest.raises(InvalidEvent) as excinfo:
        registry.batch("pos", ts=[1, 2], key=1.5)
    assert _invalid(excinfo) == (None, "key", "not an integer (1.5)")
    assert str(excinfo.value) == "field 'key': not an integer (1.5)"


def test_batch_accepts_integral_floats_for_integer_payload(registry: TypeRegistry) -> None:
    events = registry.batch("pos", ts=[1, 2], zone=np.array([3.0, -4.0]))
    assert events["zone"].tolist() == [3, -4]
    events = registry.batch("count", ts=1, n=np.array([2**63], dtype=np.uint64), big=-(2**63))
    assert events["n"].tolist() == [2**63]
    assert events["big"].tolist() == [-(2**63)]


# ----------------------------------------------------------------------- from_records


def test_from_records_builds_union_dtype(registry: TypeRegistry) -> None:
    events = registry.from_records(
        [
            {"type": "kick", "ts": 5, "key": 2, "speed": 3.5, "hard": True},
            {"type": 1, "ts": np.int64(4), "x": 1.25, "flags": LATE, "seq": 3},
        ]
    )
    assert events.dtype == registry.dtype(["pos", "kick"])
    assert events["type"].tolist() == [2, 1]
    assert events["ts"].tolist() == [5, 4]
    assert events["key"].tolist() == [2, 0]
    assert events["speed"].tolist() == [3.5, 0.0]
    assert events["hard"].tolist() == [True, False]
    assert events["x"].tolist() == [0.0, 1.25]
    assert events["flags"].tolist() == [0, LATE]
    assert events["seq"].tolist() == [0, 3]


def test_from_records_empty_and_given_dtype(registry: TypeRegistry) -> None:
    assert registry.from_records([]).dtype == CORE_DTYPE
    wide = registry.dtype()
    events = registry.from_records(iter([{"type": "pos", "ts": 1}]), dtype=wide)
    assert events.dtype == wide
    with pytest.raises(ValueError, match="lacks field 'speed'"):
        registry.from_records([{"type": "kick", "ts": 1}], dtype=registry.dtype(["pos"]))


def _valid_prefix() -> list[dict[str, Any]]:
    return [{"type": "pos", "ts": i} for i in range(3)]


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        ({"type": "pos", "ts": "abc"}, "ts", "not an integer ('abc')"),
        ({"type": "pos", "ts": True}, "ts", "not an integer (True)"),
        ({"type": "pos", "ts": 5.0}, "ts", "not an integer (5.0)"),
        ({"type": "pos", "ts": np.float64(5.5)}, "ts", "not an integer (5.5)"),
        ({"type": "pos", "ts": None}, "ts", "not an integer (None)"),
        ({"type": "pos", "ts": 2**63}, "ts", "out of range for int64 (9223372036854775808)"),
        ({"type": "pos", "ts": -(2**63) - 1}, "ts",
         "out of range for int64 (-9223372036854775809)"),
        ({"type": "pos"}, "ts", "missing"),
        ({"ts": 1}, "type", "missing"),
        ({"type": "nope", "ts": 1}, "type", "unknown event type 'nope'"),
        ({"type": 9, "ts": 1}, "type", "unknown event type id 9"),
        ({"type": 0, "ts": 1}, "type", "unknown event type id 0"),
        ({"type": True, "ts": 1}, "type", "not a type name or id (True)"),
        ({"type": "pos", "ts": 1, "zone": 1.5}, "zone", "not an integer (1.5)"),
        ({"type": "pos", "ts": 1, "zone": float("nan")}, "zone", "not an integer (nan)"),
        ({"type": "pos", "ts": 1, "zone": 2**15}, "zone", "out of range for int16 (32768)"),
        ({"type": "count", "ts": 1, "n": -1}, "n", "out of range for uint64 (-1)"),
        ({"type": "count", "ts": 1, "big": 2**63}, "big",
         "out of range for int64 (9223372036854775808)"),
        ({"type": "pos", "ts": 1, "x": "1.5"}, "x", "not a number ('1.5')"),
        ({"type": "pos", "ts": 1, "x": 1e39}, "x", "overflows float32 (1e+39)"),
        ({"type": "pos", "ts": 1, "x": True}, "x", "not a number (True)"),
        ({"type": "kick", "ts": 1, "hard": 2}, "hard", "not a boolean (2)"),
        ({"type": "kick", "ts": 1, "hard": "yes"}, "hard", "not a boolean ('yes')"),
        ({"type": "kick", "ts": 1, "speed": 2**53 + 1}, "speed",
         "not exactly representable as float64 (9007199254740993)"),
        ({"type": "pos", "ts": 1, "speed": 1.0}, "speed", "not a field of type 'pos'"),
        ({"type": "pos", "ts": 1, "other": 1}, "other", "not a field of type 'pos'"),
        ({"type": "pos", "ts": 1, "flags": 32}, "flags", "out of range 0..31 (32)"),
        ({"type": "pos", "ts": 1, "flags": -1}, "flags", "out of range for uint8 (-1)"),
        ({"type": "pos", "ts": 1, "key": 1.0}, "key", "not an integer (1.0)"),
        ({"type": "pos", "ts": 1, "seq": "3"}, "seq", "not an integer ('3')"),
        ({"type": "pos", "ts": 1, "producer": 2**31}, "producer",
         "out of range for int32 (2147483648)"),
    ],
)  # fmt: skip
def test_from_records_rejects(
    registry: TypeRegistry, bad: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidEvent) as excinfo:
        registry.from_records([*_valid_prefix(), bad])
    assert _invalid(excinfo) == (3, field, reason)
    assert str(excinfo.value) == f"record 3, field {field!r}: {reason}"
    assert isinstance(excinfo.value, ValueError)


def test_from_records_rejects_non_mappings_and_non_string_keys(registry: TypeRegistry) -> None:
    with pytest.raises(InvalidEvent) as excinfo:
        registry.from_records([{"type": "pos", "ts": 1}, [("type", "pos")]])
    assert _invalid(excinfo) == (1, None, "not a mapping ([('type', 'pos')])")
    with pytest.raises(InvalidEvent) as excinfo:
        registry.from_records([{"type": "pos", "ts": 1, 3: 4}])
    assert _invalid(excinfo) == (0, None, "field name is not a string (3)")


def test_from_records_accepts_lossless_conversions(registry: TypeRegistry) -> None:
    events = registry.from_records(
        [
            {"type": "pos", "ts": np.int32(1), "zone": 3.0, "x": 2, "y": np.float64(0.5)},
            {"type": "kick", "ts": 2, "hard": 1, "foot": np.uint8(7), "speed": float("-inf")},
            {"type": "count", "ts": 3, "n": 2**64 - 1, "big": -(2**63)},
        ]
    )
    assert events["zone"].tolist() == [3, 0, 0]
    assert events["x"].tolist() == [2.0, 0.0, 0.0]
    assert events["hard"].tolist() == [False, True, False]
    assert events["foot"].tolist() == [0, 7, 0]
    assert events["speed"][1] == -np.inf
    assert events["n"][2] == 2**64 - 1
    assert events["big"][2] == -(2**63)


def test_invalid_event_message_and_pickle() -> None:
    exc = InvalidEvent(3, "ts", "not an integer ('abc')")
    assert str(exc) == "record 3, field 'ts': not an integer ('abc')"
    assert str(InvalidEvent(None, "x", "bad")) == "field 'x': bad"
    assert str(InvalidEvent(2, None, "bad")) == "record 2: bad"
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.record, copy.field, copy.reason) == (3, "ts", "not an integer ('abc')")
    assert str(copy) == str(exc)


# ---------------------------------------------------------------------- validate_batch


def test_validate_batch_flags_bad_rows(registry: TypeRegistry) -> None:
    events = registry.batch("pos", ts=np.arange(5))
    events["type"][1] = 0
    events["type"][3] = 17
    events["flags"][3] = 32
    events["flags"][4] = 255
    bad, errors = validate_batch(events, registry)
    assert bad.dtype == np.bool_
    assert bad.tolist() == [False, True, False, True, True]
    assert [(e.record, e.field, e.reason) for e in errors] == [
        (1, "type", "unknown event type id 0"),
        (3, "type", "unknown event type id 17"),
        (3, "flags", "out of range 0..31 (32)"),
        (4, "flags", "out of range 0..31 (255)"),
    ]


def test_validate_batch_names_a_type_id_that_is_no_whole_number(registry: TypeRegistry
                                                                 ) -> None:
    """A batch built with float columns (from a CSV, say): NaN, an infinity or a
    fraction is shown as it was, not as what a cast to an integer makes of it."""
    events = np.zeros(5, [("type", "f8"), ("flags", "f8")])
    events["type"] = [1, np.nan, 2.5, np.inf, 1]
    events["flags"] = [0, 0, 0, 0, np.nan]
    bad, errors = validate_batch(events, registry)
    assert bad.tolist() == [False, True, True, True, True]
    assert [(e.record, e.field, e.reason) for e in errors] == [
        (1, "type", "unknown event type id nan"),
        (2, "type", "unknown event type id 2.5"),
        (3, "type", "unknown event type id inf"),
        (4, "flags", "out of range 0..31 (nan)"),
    ]


def test_validate_batch_clean_and_malformed(registry: TypeRegistry) -> None:
    events = registry.batch("count", ts=[1, 2], flags=RETRACTION | UPDATE | LATE)
    bad, errors = validate_batch(events, registry)
    assert not bad.any() and errors == []
    assert validate_batch(empty(), registry)[0].shape == (0,)
    with pytest.raises(ValueError, match="structured"):
        validate_batch(np.zeros(3), registry)
    with pytest.raises(ValueError, match="'flags'"):
        validate_batch(np.zeros(3, dtype=[("type", "i4")]), registry)


# ------------------------------------------------------------------ concat / conform


def test_empty() -> None:
    batch = empty()
    assert batch.dtype == CORE_DTYPE and batch.shape == (0,)
    batch = empty(CORE_DTYPE, 4)
    assert batch.shape == (4,) and not batch["ts"].any() and not batch["type"].any()


def test_conform_fills_missing_and_checks_extra(registry: TypeRegistry) -> None:
    pos = registry.batch("pos", ts=[1, 2], x=[1.5, 2.5], zone=3)
    wide = conform(pos, registry.dtype())
    assert wide.dtype == registry.dtype()
    assert wide["x"].tolist() == [1.5, 2.5]
    assert wide["zone"].tolist() == [3, 3]
    assert wide["speed"].tolist() == [0.0, 0.0]
    assert wide["ts"].tolist() == [1, 2]

    with pytest.raises(ValueError, match="field 'x'"):
        conform(wide, registry.dtype(["kick"]))
    narrow = conform(wide, registry.dtype(["kick"]), drop=True)
    assert narrow.dtype == registry.dtype(["kick"])
    assert narrow["ts"].tolist() == [1, 2]

    same = conform(pos, pos.dtype)
    assert same is not pos and same.tobytes() == pos.tobytes()
    same["ts"][0] = 99
    assert pos["ts"][0] == 1


def test_conform_rejects_lossy_casts(registry: TypeRegistry) -> None:
    pos = registry.batch("pos", ts=1)
    target = np.dtype(
        [(name, "i2" if name == "ts" else pos.dtype[name]) for name in pos.dtype.names]
    )
    with pytest.raises(ValueError, match="field 'ts'"):
        conform(pos, target)


def test_concat_builds_union_dtype(registry: TypeRegistry) -> None:
    pos = registry.batch("pos", ts=[1, 2], x=[0.5, 1.5])
    kick = registry.batch("kick", ts=[3], speed=9.0)
    both = concat([pos, kick])
    assert both.dtype == registry.dtype(["pos", "kick"])
    assert both["ts"].tolist() == [1, 2, 3]
    assert both["type"].tolist() == [1, 1, 2]
    assert both["x"].tolist() == [0.5, 1.5, 0.0]
    assert both["speed"].tolist() == [0.0, 0.0, 9.0]

    wide = concat([kick, pos], dtype=registry.dtype())
    assert wide.dtype == registry.dtype()
    assert wide["ts"].tolist() == [3, 1, 2]

    assert concat([]).dtype == CORE_DTYPE and len(concat([])) == 0
    assert concat([], dtype=registry.dtype()).dtype == registry.dtype()
    assert concat([pos[:0], kick[:0]]).shape == (0,)


def test_concat_errors(registry: TypeRegistry) -> None:
    pos = registry.batch("pos", ts=[1])
    other = np.zeros(1, dtype=[*CORE_DTYPE.descr, ("x", "f8")])
    with pytest.raises(ValueError, match="field 'x'"):
        concat([pos, other])
    with pytest.raises(ValueError, match="field 'x'"):
        concat([pos], dtype=registry.dtype(["kick"]))


# ---------------------------------------------------------------------- event codec


def test_encode_event_map_has_python_scalars(registry: TypeRegistry) -> None:
    row = registry.batch("kick", ts=5, key=2, seq=3, flags=UPDATE, speed=1.5, hard=True)[0]
    data = encode_event(row, registry)
    raw = msgpack.unpackb(data)
    assert list(raw) == ["type", *CORE_NAMES[:1], *CORE_NAMES[2:], "speed", "foot", "hard"]
    assert raw["type"] == "kick"
    assert raw["ts"] == 5 and raw["seq"] == 3 and raw["flags"] == UPDATE
    assert raw["speed"] == 1.5 and raw["hard"] is True and raw["foot"] == 0
    decoded = decode_event(data, registry)
    assert decoded == raw
    assert all(type(v) in (str, int, float, bool) for v in decoded.values())


def test_encode_event_from_mapping_and_wide_row(registry: TypeRegistry) -> None:
    from_mapping = encode_event({"type": "pos", "ts": 7, "x": 0.25}, registry)
    wide = registry.batch("pos", ts=7, x=0.25, dtype=registry.dtype())
    assert encode_event(wide[0], registry) == from_mapping
    # Only the payload of the event's own type goes into the map.
    assert set(msgpack.unpackb(from_mapping)) == {
        "type",
        *CORE_NAMES[:1],
        *CORE_NAMES[2:],
        "x",
        "y",
        "zone",
    }


def test_encode_event_validates(registry: TypeRegistry) -> None:
    with pytest.raises(InvalidEvent) as excinfo:
        encode_event({"type": "pos", "ts": 1.5}, registry)
    assert _invalid(excinfo) == (None, "ts", "not an integer (1.5)")
    row = registry.batch("pos", ts=1)
    row["flags"] = 33
    with pytest.raises(InvalidEvent, match="flags"):
        encode_event(row[0], registry)
    row["type"] = 42
    with pytest.raises(InvalidEvent, match="unknown event type id 42"):
        encode_event(row[0], registry)
    with pytest.raises(TypeError):
        encode_event([1, 2], registry)  # type: ignore[arg-type]


def test_decode_event_rejects_malformed(registry: TypeRegistry) -> None:
    with pytest.raises(ValueError, match="msgpack map"):
        decode_event(msgpack.packb([1, 2]), registry)
    with pytest.raises(ValueError, match="malformed msgpack"):
        decode_event(b"\xc1", registry)
    with pytest.raises(ValueError, match="malformed msgpack"):
        decode_event(msgpack.packb({"type": "pos"}) + b"\x00", registry)
    with pytest.raises(InvalidEvent) as excinfo:
        decode_event(msgpack.packb({"type": "nope", "ts": 1}), registry)
    assert _invalid(excinfo) == (None, "type", "unknown event type 'nope'")
    with pytest.raises(InvalidEvent) as excinfo:
        decode_event(msgpack.packb({"type": "pos", "ts": 1, "speed": 1.0}), registry)
    assert _invalid(excinfo) == (None, "speed", "not a field of type 'pos'")


def test_decode_event_fills_absent_fields(registry: TypeRegistry) -> None:
    decoded = decode_event(msgpack.packb({"type": "count", "ts": 3, "n": 2**64 - 1}), registry)
    assert decoded == {
        "type": "count",
        "ts": 3,
        **{name: 0 for name in CORE_NAMES[2:]},
        "n": 2**64 - 1,
        "zone": 0,
        "big": 0,
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


def _payload_values(dtype: np.dtype) -> st.SearchStrategy[Any]:
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(int(info.min), int(info.max))
    return st.floats(width=8 * dtype.itemsize)


_EVENT_REGISTRY = _registry()


@st.composite
def _records(draw: st.DrawFn) -> dict[str, Any]:
    etype = draw(st.sampled_from(_EVENT_REGISTRY.types()))
    record: dict[str, Any] = {"type": etype.name}
    for name, dtype in CORE_FIELDS:
        if name == "type":
            continue
        if name == "flags":
            record[name] = draw(st.integers(0, 7))
        else:
            info = np.iinfo(dtype)
            record[name] = draw(st.integers(int(info.min), int(info.max)))
    for name, dtype in etype.fields:
        if draw(st.booleans()):
            record[name] = draw(_payload_values(dtype))
    return record


@settings(max_examples=60, deadline=None)
@given(_records())
def test_event_codec_round_trip(record: dict[str, Any]) -> None:
    registry = _EVENT_REGISTRY
    row = registry.from_records([record])
    data = encode_event(row[0], registry)
    assert encode_event(record, registry) == data
    decoded = decode_event(data, registry)
    assert decoded["type"] == record["type"]
    # Payload floats are drawn at their field's width, so every value is stored exactly.
    for name, value in record.items():
        assert _same(decoded[name], value), name
    assert set(decoded) == {
        "type",
        *CORE_NAMES[:1],
        *CORE_NAMES[2:],
        *registry[record["type"]].field_names,
    }
    again = registry.from_records([decoded], dtype=row.dtype)
    assert again.dtype == row.dtype
    assert again.tobytes() == row.tobytes()


# ---------------------------------------------------------------------- batch codec


@st.composite
def _batches(draw: st.DrawFn) -> np.ndarray:
    payload = draw(st.lists(st.sampled_from(PAYLOAD_DTYPES), max_size=6))
    fields = [*CORE_DTYPE.descr, *[(f"p{i}", dtype) for i, dtype in enumerate(payload)]]
    dtype = np.dtype(fields)
    return draw(hnp.arrays(dtype, st.integers(0, 50)))


@settings(max_examples=60, deadline=None)
@given(_batches())
def test_batch_codec_round_trip(batch: np.ndarray) -> None:
    data = encode_batch(batch)
    decoded = decode_batch(data)
    assert decoded.dtype == batch.dtype
    assert decoded.dtype.names == batch.dtype.names
    assert decoded.tobytes() == batch.tobytes()
    assert decoded.flags.writeable and decoded.flags.owndata
    assert encode_batch(decoded) == data


@settings(max_examples=30, deadline=None)
@given(
    ts=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50),
    big=st.integers(-(2**63), 2**63 - 1),
    speed=st.floats(),
)
def test_registry_batch_codec_round_trip(ts: list[int], big: int, speed: float) -> None:
    registry = _EVENT_REGISTRY
    batch = concat(
        [
            registry.batch("kick", ts=ts, speed=speed, hard=True),
            registry.batch("count", ts=ts, big=big, n=2**64 - 1),
        ]
    )
    decoded = decode_batch(encode_batch(batch))
    assert decoded.dtype == batch.dtype == registry.dtype(["kick", "count"])
    assert decoded.tobytes() == batch.tobytes()


def test_batch_codec_extreme_values() -> None:
    dtype = np.dtype([*CORE_DTYPE.descr, ("i", "i8"), ("u", "u8"), ("f", "f8"), ("h", "f4")])
    batch = np.zeros(4, dtype=dtype)
    batch["ts"] = [-(2**63), 2**63 - 1, 0, -1]
    batch["i"] = [-(2**63), 2**63 - 1, 1, -1]
    batch["u"] = [0, 2**64 - 1, 1, 2**63]
    batch["f"] = [np.nan, np.inf, -np.inf, -0.0]
    batch["h"] = [np.nan, np.finfo(np.float32).max, np.finfo(np.float32).tiny, -0.0]
    decoded = decode_batch(encode_batch(batch))
    assert decoded.dtype == dtype
    assert decoded.tobytes() == batch.tobytes()


def test_encode_batch_normalises_layout() -> None:
    big_endian = np.zeros(3, dtype=[("ts", ">i8"), ("v", ">f4")])
    big_endian["ts"] = [1, 2, 3]
    big_endian["v"] = [0.5, 1.5, 2.5]
    decoded = decode_batch(encode_batch(big_endian))
    assert decoded.dtype == np.dtype([("ts", "<i8"), ("v", "<f4")])
    assert decoded["ts"].tolist() == [1, 2, 3]
    assert decoded["v"].tolist() == [0.5, 1.5, 2.5]

    padded = np.zeros(2, dtype=np.dtype([("a", "u1"), ("b", "i8")], align=True))
    padded["b"] = [5, 6]
    decoded = decode_batch(encode_batch(padded))
    assert decoded.dtype.itemsize == 9
    assert decoded["b"].tolist() == [5, 6]

    strided = np.zeros(6, dtype=CORE_DTYPE)
    strided["ts"] = np.arange(6)
    assert decode_batch(encode_batch(strided[::2]))["ts"].tolist() == [0, 2, 4]


def test_encode_batch_rejects_unsupported() -> None:
    with pytest.raises(ValueError, match="structured"):
        encode_batch(np.zeros(3))
    with pytest.raises(ValueError, match="unsupported dtype"):
        encode_batch(np.zeros(3, dtype=[("ts", "i8"), ("name", "U4")]))


def _message(**changes: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "v": 1,
        "fields": [["ts", "<i8"], ["flag", "|b1"]],
        "n": 2,
        "data": bytes(18),
    }
    message.update(changes)
    return message


def test_decode_batch_reference_message() -> None:
    decoded = decode_batch(msgpack.packb(_message()))
    assert decoded.dtype == np.dtype([("ts", "<i8"), ("flag", "?")])
    assert decoded.tolist() == [(0, False), (0, False)]


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (_message(v=2), "unsupported batch encoding version 2"),
        (_message(v=True), "version"),
        (_message(n=3), "size mismatch"),
        (_message(data=bytes(17)), "size mismatch"),
        (_message(n=-1), "non-negative"),
        (_message(n="2"), "non-negative"),
        (_message(data="x" * 18), "binary"),
        (_message(fields=[["ts", "<q8"]]), "unknown dtype"),
        (_message(fields=[["ts", "|O"], ["flag", "|b1"]]), "unsupported dtype"),
        (_message(fields=[["ts", "<U2"], ["flag", "|b1"]]), "unsupported dtype"),
        (_message(fields=[["ts", ">i8"], ["flag", "|b1"]]), "unsupported dtype"),
        (_message(fields=[["ts", "<i8"], ["ts", "|b1"]]), "duplicate"),
        (_message(fields=[["", "<i8"], ["flag", "|b1"]]), "empty"),
        (_message(fields=[["ts", "<i8", 1], ["flag", "|b1"]]), r"\[name, dtype\]"),
        (_message(fields=[]), "non-empty"),
        (_message(fields="ts"), "non-empty"),
        (_message(data=bytes(8) + b"\x02" + bytes(9)), "bool field 'flag'"),
        (_message(extra=1), "unexpected keys"),
        ({"v": 1, "fields": [["ts", "<i8"]], "n": 0}, "missing keys"),
        ([1, 2, 3], "msgpack map"),
    ],
)
def test_decode_batch_rejects_malformed(message: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        decode_batch(msgpack.packb(message))


def test_decode_batch_rejects_broken_bytes() -> None:
    good = encode_batch(empty(CORE_DTYPE, 2))
    with pytest.raises(ValueError, match="malformed msgpack"):
        decode_batch(good[:-3])
    with pytest.raises(ValueError, match="malformed msgpack"):
        decode_batch(good + b"\x00")
    with pytest.raises(ValueError, match="malformed msgpack"):
        decode_batch(b"")
