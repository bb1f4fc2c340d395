"""Events made with one registry, read with another: fingerprints and id translation."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from specula.events import (
    RegistryMismatchError,
    TypeRegistry,
    batch_registry,
    decode_batch,
    encode_batch,
    translate_types,
    type_table,
)
from specula.soccer.types import POSITION_FIELDS, WEARER_FIELDS, soccer_registry

RAW = ("ball", "player", "referee")


def _registry(order: tuple[str, ...] = RAW, ticks: float = 10**12) -> TypeRegistry:
    reg = TypeRegistry(ticks_per_second=ticks)
    for name in order:
        reg.register(name, **POSITION_FIELDS, **({} if name == "ball" else WEARER_FIELDS))
    return reg


def test_fingerprint_is_stable_and_covers_order_fields_and_unit():
    assert soccer_registry().fingerprint() == soccer_registry().fingerprint()
    assert _registry().fingerprint() != _registry(("player", "ball", "referee")).fingerprint()
    assert _registry().fingerprint() != _registry(ticks=1).fingerprint()
    other = TypeRegistry(ticks_per_second=10**12)
    other.register("ball", **{**POSITION_FIELDS, "x": "f8"})
    assert other.fingerprint() != _registry(("ball",)).fingerprint()


def test_same_registry_or_same_table_needs_no_translation():
    reg = soccer_registry()
    assert type_table(reg, reg, needed=RAW) is None
    assert type_table(reg, soccer_registry(), needed=RAW) is None
    # a reader that only appends types of its own reads the ids as they are
    longer = _registry()
    longer.register("whistle")
    assert type_table(_registry(), longer, needed=RAW) is None


def test_registry_order_translates_ids_by_name():
    made, read = soccer_registry(), _registry(("player", "ball", "referee"))
    table = type_table(made, read, needed=RAW)
    assert table is not None
    for name in RAW:
        assert table[made.id(name)] == read.id(name)
    assert table[made.id("pass")] == 0  # a type the reader lacks is delivered to nobody
    batch = made.batch("ball", ts=[1, 2, 3], dtype=made.dtype(RAW))
    batch["type"][2] = made.id("player")
    assert [read.name(i) for i in translate_types(batch, table)["type"]] == \
        ["ball", "ball", "player"]
    assert batch["type"][0] == made.id("ball")  # the input is not changed


def test_ids_outside_the_table_become_the_invalid_type():
    table = type_table(_registry(), _registry(("referee", "player", "ball")), needed=RAW)
    batch = np.zeros(4, _registry().dtype())
    batch["type"] = [-1, 0, 3, 99]
    assert translate_types(batch, table)["type"].tolist() == [0, 0, 1, 0]


def test_a_needed_type_the_events_cannot_carry_is_refused():
    read = _registry()
    read.register("whistle")
    with pytest.raises(RegistryMismatchError,
                       match="'whistle' is not in the registry the events were made with"):
        type_table(_registry(("player", "ball", "referee")), read, needed=(*RAW, "whistle"))


def test_a_type_the_reader_lacks_is_refused_with_its_fields():
    with pytest.raises(RegistryMismatchError, match=r"'referee' of the events is not in the "
                       r"registry they are read with \(player, ball\); register it there "
                       r"with the fields \(x: int64"):
        type_table(_registry(), _registry(("player", "ball")), needed=RAW)


def test_other_fields_or_another_time_unit_are_refused():
    read = TypeRegistry(ticks_per_second=10**12)
    read.register("ball", **{**POSITION_FIELDS, "z": "f8"})
    with pytest.raises(RegistryMismatchError, match=r"'ball' has fields \(.*z: int64.*\) where "
                       r"the events were made, but \(.*z: float64.*\)"):
        type_table(_registry(), read, needed=("ball",))
    with pytest.raises(RegistryMismatchError, match=r"in 1e\+12 ticks per second, but the "
                       r"registry they are read with declares 1; create it with "
                       r"TypeRegistry\(ticks_per_second=1e\+12\)"):
        type_table(_registry(), _registry(ticks=1), needed=RAW)


def test_an_encoded_batch_carries_the_registry_it_was_made_with():
    made = _registry(("player", "ball", "referee"))
    batch = made.batch("ball", ts=[5, 6], dtype=made.dtype(RAW))
    data = encode_batch(batch, made)
    assert np.array_equal(decode_batch(data), batch)
    assert batch_registry(data).fingerprint() == made.fingerprint()
    assert batch_registry(encode_batch(batch)) is None  # encoded without one


def test_a_malformed_type_table_is_refused():
    batch = _registry().batch("ball", ts=[5])
    message = msgpack.unpackb(encode_batch(batch, _registry()))
    message["types"]["types"][0][1] = [["x", "U3"]]
    with pytest.raises(ValueError, match="malformed batch: unreadable type table"):
        batch_registry(msgpack.packb(message))
