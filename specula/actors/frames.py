"""Arrays stored as *frames*: a short header, then each array's bytes as they lie in
memory, so that writing an actor's output to storage copies nothing in Python.

An object of frames is ``len(header)`` (4 bytes, little-endian), the header (msgpack:
the caller's ``meta`` and, per array, its dtype as ``.npy`` files describe it and its
rows) and the arrays' bytes one after the other. :func:`frames` returns it as a list of
buffers for :meth:`~.recovery.Store.write`, which signs and writes them part by part:
an array given as several pieces (the batches a net output applied) is written piece
by piece, never concatenated, and no ``np.save`` into a buffer and out of it, no
msgpack copy of the bytes and no join with the signature come between. Reading
(:func:`read_frames`) is the one copy, into arrays of their own; the dtypes come back
without pickle (:func:`numpy.lib.format.descr_to_dtype`), and the object is read only
once its signature checks.

>>> import numpy as np
>>> parts = frames([1, 2], [[np.arange(2), np.arange(3)], [np.zeros(1, "f4")]])
>>> meta, (ints, floats) = read_frames(b"".join(parts))
>>> meta, ints.tolist(), floats.tolist()
([1, 2], [0, 1, 0, 1, 2], [0.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np
from numpy.lib.format import descr_to_dtype, dtype_to_descr

__all__ = ["frames", "read_frames"]

_LENGTH = 4  # bytes of the header's length


def frames(meta: Any, arrays: Sequence[Sequence[np.ndarray]]) -> list[bytes | memoryview]:
    """The buffers of an object holding ``meta`` (msgpack-ready) and ``arrays``, each
    given as pieces of one dtype, whose rows follow each other in the array read back.
    The buffers are views of the pieces: write them before the pieces change."""
    layout, data = [], []
    for pieces in arrays:
        if not pieces:
            raise ValueError("an array of frames needs at least one piece, for its dtype")
        dtype = pieces[0].dtype
        if any(p.dtype != dtype for p in pieces):
            raise ValueError(f"the pieces of one array differ in dtype: "
                             f"{sorted({str(p.dtype) for p in pieces})}")
        layout.append([dtype_to_descr(dtype), sum(p.size for p in pieces)])
        data += [_bytes_of(p) for p in pieces if p.size]
    header = msgpack.packb([meta, layout], use_bin_type=True)
    return [len(header).to_bytes(_LENGTH, "little"), header, *data]


def read_frames(data: bytes) -> tuple[Any, list[np.ndarray]]:
    """The ``meta`` and the arrays (1-D, writable, each its own memory) of an object
    :func:`frames` made (``ValueError`` if the bytes do not add up to it)."""
    size = int.from_bytes(data[:_LENGTH], "little")
    meta, layout = msgpack.unpackb(data[_LENGTH:_LENGTH + size], raw=False)
    at, arrays = _LENGTH + size, []
    for descr, rows in layout:
        dtype = descr_to_dtype(descr)  # msgpack's lists read as the tuples written
        arrays.append(np.frombuffer(data, dtype, rows, at).copy())
        at += rows * dtype.itemsize
    if at != len(data):
        raise ValueError(f"frames of {at} bytes in an object of {len(data)}")
    return meta, arrays


def _bytes_of(a: np.ndarray) -> memoryview:
    """The bytes of ``a`` in row order, a view where it is contiguous."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data

