"""Reading batches made with one registry through another: type ids translated by name.

A batch carries type *ids*; what an id means is the registry's. Events made with one
registry (a sensor log's) and read with another (a user graph's) agree only if every
type that matters has the same name, fields and time unit in both. :func:`type_table`
checks that once, from the two registries, and gives the id translation;
:func:`translate_types` applies it to a batch (one lookup per batch, no per-event
Python).

>>> from specula.events.registry import TypeRegistry
>>> made, read = TypeRegistry(), TypeRegistry()
>>> _ = made.register("ball", x="i8"), made.register("player", x="i8")
>>> _ = read.register("player", x="i8"), read.register("ball", x="i8")
>>> table = type_table(made, read, needed=("ball", "player"))
>>> table.tolist()
[0, 2, 1]
>>> batch = made.batch("ball", ts=[1, 2])
>>> translate_types(batch, table)["type"].tolist(), read.name(2)
([2, 2], 'ball')
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from specula.events.convert import _describe_fields
from specula.events.registry import EventType, TypeRegistry

__all__ = ["RegistryMismatchError", "translate_types", "type_table"]


class RegistryMismatchError(ValueError):
    """Events whose type ids cannot be read with a registry; the message says what to
    change."""


def type_table(made_with: TypeRegistry, read_with: TypeRegistry, *,
               needed: Iterable[str]) -> np.ndarray | None:
    """How the type ids of events made with ``made_with`` read in ``read_with``.

    Parameters
    ----------
    made_with
        The registry the events' type ids come from.
    read_with
        The registry of whoever reads them (e.g. a graph's).
    needed
        The type names that must mean the same in both: present in both registries,
        with the same payload fields.

    Returns
    -------
    numpy.ndarray or None
        None when the ids already mean the same (equal fingerprints, or the same id for
        every type). Otherwise ``table`` with ``table[i]`` the id in ``read_with`` of
        the type with id ``i`` in ``made_with``, where ``read_with`` has a type of that
        name with the same fields, and 0 (the invalid type, which nobody receives)
        where it has not.

    Raises
    ------
    RegistryMismatchError
        If the time units differ, or a needed type is missing from either registry or
        has other fields in one than in the other. The message names the type.
    """
    if made_with is read_with or made_with.fingerprint() == read_with.fingerprint():
        return None
    _check_unit(made_with, read_with)
    for name in needed:
        _check_type(name, made_with, read_with)
    table = np.zeros(len(made_with) + 1, np.int32)
    for etype in made_with.types():
        if etype.name in read_with and _same_fields(read_with[etype.name], etype):
            table[etype.id] = read_with.id(etype.name)
    return None if np.array_equal(table, np.arange(len(table))) else table


def translate_types(batch: np.ndarray, table: np.ndarray | None) -> np.ndarray:
    """A copy of ``batch`` with its type ids read through ``table`` (from
    :func:`type_table`; None: unchanged). Ids outside the table become 0."""
    out = batch.copy()
    if table is None or not len(out):
        return out
    ids = out["type"].astype(np.int64)
    inside = (ids >= 0) & (ids < len(table))
    out["type"] = np.where(inside, table[np.where(inside, ids, 0)], 0)
    return out


def _check_unit(made_with: TypeRegistry, read_with: TypeRegistry) -> None:
    made, read = made_with.ticks_per_second, read_with.ticks_per_second
    if made != read:
        raise RegistryMismatchError(
            f"the events' time stamps are in {made:g} ticks per second, but the registry "
            f"they are read with declares {read:g}; create it with "
            f"TypeRegistry(ticks_per_second={made:g})")


def _check_type(name: str, made_with: TypeRegistry, read_with: TypeRegistry) -> None:
    if name not in made_with:
        raise RegistryMismatchError(
            f"event type {name!r} is not in the registry the events were made with "
            f"({_names(made_with)}), so no event of it can arrive; read only the types "
            "the events carry, or make them with a registry that has it")
    made = made_with[name]
    if name not in read_with:
        raise RegistryMismatchError(
            f"event type {name!r} of the events is not in the registry they are read with "
            f"({_names(read_with)}); register it there with the fields "
            f"{_describe_fields(made.fields, made.strings)}")
    read = read_with[name]
    if not _same_fields(made, read):
        raise RegistryMismatchError(
            f"event type {name!r} has fields {_describe_fields(made.fields, made.strings)} "
            f"where the events were made, but {_describe_fields(read.fields, read.strings)} "
            "in the registry they are read with; register it with the same fields")


def _same_fields(a: EventType, b: EventType) -> bool:
    """Whether two types' payloads mean the same: fields, dtypes and string fields."""
    return (a.fields, a.strings) == (b.fields, b.strings)


def _names(registry: TypeRegistry) -> str:
    return ", ".join(t.name for t in registry.types()) or "no types"
