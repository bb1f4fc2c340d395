"""Fields of event rows read from their bytes inside compiled kernels.

A kernel that takes rows as their bytes (one array, instead of each field apart, each
of which costs a compiled call its dispatch) reads a field at its byte offset by its
*kind*, a code for its dtype (:func:`kind_of`): every dtype a payload field may have
(bool, integers and floats of at most 64 bits) and the core fields. The CDP engine
hands its detection kernel the terminators this way, and the ordering unit's K-slack
kernel its run of rows.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["KINDS", "KIND_I4", "KIND_I8", "bits_at", "bits_of", "copy_bytes", "float_at", "int_at",
           "kind_of", "put_int8"]

KINDS = ("b1", "u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f2", "f4", "f8")
"""The dtypes a field read as bytes may have; its kind is its place in this tuple."""
_B1, _U1, _U2, _U4, _U8, _I1, _I2, _I4, _I8, _F2, _F4, _F8 = range(len(KINDS))
KIND_I4, KIND_I8 = _I4, _I8


def kind_of(dtype: np.dtype) -> int:
    """The kind of a field of ``dtype`` (native or little-endian byte order)."""
    little = np.dtype(dtype).newbyteorder("<")
    for kind, name in enumerate(KINDS):
        if little == np.dtype(name).newbyteorder("<"):
            return kind
    raise TypeError(f"a field read as bytes must be bool, an integer or a float of at most "
                    f"64 bits in little-endian order, got {dtype}")


@intrinsic
def _f64_of_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float64 whose bits are the int64 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@intrinsic
def bits_of(typingctx, value):  # pragma: no cover - compiled
    """The bits of the float64 ``value``, as int64."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _f32_of_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float32 whose bits are the int32 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(types.int32), codegen


@njit(cache=True, nogil=True)
def bits_at(buf, at, size):  # pragma: no cover - jit
    """The ``size`` bytes at ``buf[at]`` as an unsigned little-endian integer, in int64."""
    v = np.int64(0)
    at = np.uint64(at)  # unsigned: no check for negative indices, so the loads combine
    for i in range(size - 1, -1, -1):
        v = (v << 8) | np.int64(buf[at + np.uint64(i)])
    return v


_SIZE = np.array([np.dtype(name).itemsize for name in KINDS], np.int64)


@njit(cache=True, nogil=True)
def int_at(buf, at, kind):  # pragma: no cover - jit
    """The field of ``kind`` at ``buf[at]`` as int64, as NumPy's ``astype(np.int64)``
    gives it (unsigned 64-bit values wrap; finite floats are truncated)."""
    if kind >= _F2:
        return np.int64(float_at(buf, at, kind))
    return _integer_at(buf, at, kind)


@njit(cache=True, nogil=True)
def float_at(buf, at, kind):  # pragma: no cover - jit
    """The field of ``kind`` at ``buf[at]`` as float64, as NumPy's
    ``astype(np.float64)`` gives it."""
    if kind == _F8:
        return _f64_of_bits(bits_at(buf, at, 8))
    if kind == _F4:
        return np.float64(_f32_of_bits(np.int32(bits_at(buf, at, 4))))
    if kind == _F2:
        return _half(bits_at(buf, at, 2))
    if kind == _U8:
        return np.float64(np.uint64(bits_at(buf, at, 8)))
    return np.float64(_integer_at(buf, at, kind))


@njit(cache=True, nogil=True)
def _integer_at(buf, at, kind):  # pragma: no cover - jit
    """The bool or integer field of ``kind`` at ``buf[at]`` as int64."""
    size = _SIZE[kind]
    v = bits_at(buf, at, size)
    if kind >= _I1 and size < 8 and v >= np.int64(1) << (8 * size - 1):
        v -= np.int64(1) << (8 * size)
    return v


@njit(cache=True, nogil=True)
def _half(h):  # pragma: no cover - jit
    """The float64 value of the IEEE half-precision bits ``h``."""
    sign = -1.0 if h & 0x8000 else 1.0
    exponent = (h >> 10) & 0x1F
    fraction = h & 0x3FF
    if exponent == 0:  # zero or subnormal
        return sign * fraction * 2.0 ** -24
    if exponent == 31:
        return sign * np.inf if fraction == 0 else np.nan
    return sign * (1024 + fraction) * 2.0 ** (exponent - 25)


@njit(cache=True, nogil=True)
def copy_bytes(src, at, dst, to, size):  # pragma: no cover - jit
    """``dst[to:to + size] = src[at:at + size]`` for byte arrays, with unsigned indices."""
    a, t = np.uint64(at), np.uint64(to)
    for i in range(np.uint64(size)):
        dst[t + i] = src[a + i]


@njit(cache=True, nogil=True)
def put_int8(buf, at, value):  # pragma: no cover - jit
    """``buf[at:at + 8]`` = the int64 ``value``, little-endian, with unsigned indices."""
    a, v = np.uint64(at), np.uint64(value)
    for i in range(np.uint64(8)):
        buf[a + i] = np.uint8(v & np.uint64(0xFF))
        v >>= np.uint64(8)
