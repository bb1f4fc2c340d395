"""CUDA kernels of the CDP engine on GPU (Cugola & Margara, sec. 5.3 and 5.4).

They are private; :class:`specula.detectors.rules.cdp_gpu.GPUCDPEngine` prepares their
inputs. Importing this module needs no GPU: kernels compile on first launch.

A column on the device is a circular buffer: ``ts``, ``enc`` (one row per encoded
attribute) and ``num`` (one row per aggregated attribute) hold ``cap`` events, the
oldest at physical index ``head``; the kernels take logical indices ``j`` (0 = oldest)
and read ``(head + j) % cap``. The CPU has already found, by binary search on its copy
of the column, the window ``[lo, hi)`` of every partial sequence ``s`` (the step's
window and the pattern window's floor both narrow it): row ``s`` of ``seqs`` is
``[lo, hi, result, parameters..., anchor, taken...]`` (see :mod:`._cdp_gpu_buffers`),
and only its first ``m`` rows are in use. What a kernel needs of its step or reduction
that stays the same from launch to launch is one int64 array uploaded once per rule,
its *spec* (:func:`step_spec`, :func:`reduction_spec`), so that a launch passes few
arguments: Numba converts every argument of every launch in Python, at several
microseconds an array. A thread checks parameters, ``enc[chk_col[c]]`` against
parameter ``chk_par[c]`` of its sequence for each check ``c`` of the spec, then, in a
step, the ties rule and the step's predicate program: the program of
:func:`~specula.detectors.rules._cdp_plan.program`, uploaded once per rule and
interpreted on a stack in the thread's local memory, as the CPU kernels interpret it.

Grids are two-dimensional as in the paper: ``blockIdx.y`` picks the partial sequence
(striding by ``gridDim.y`` when there are more than a grid holds), the threads of the
blocks along x cover its window, contiguous threads reading contiguous events.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numba import cuda, float64, int64

from specula.detectors.rules._cdp_kernels import (
    MAX,
    MIN,
    OP_CONST,
    OP_CTX,
    OP_NUM,
    OP_TS,
    run_program,
)

_LO, _HI, _RESULT, _PARAMS = 0, 1, 2, 3  # the columns of a row of ``seqs``

# a spec: [nchk, then a step's or a reduction's own values, then at CHECKS the nchk
# checked rows of the column and the nchk parameters they are checked against]
_NCHK = 0
_NOPS, _STRICT, _POS_ROW, _AT_ANCHOR, _AT_TAKEN, _N_TAKEN = 1, 2, 3, 4, 5, 6  # a step's
_VROW, _OP = 1, 2  # a reduction's
_CHECKS = 7


def step_spec(chk_col: np.ndarray, chk_par: np.ndarray, nops: int, strict: bool,
              pos_row: int, at_anchor: int, at_taken: int, n_taken: int) -> np.ndarray:
    """The spec of a step (see the module's docstring and :func:`selections`).

    >>> step_spec(np.array([4]), np.array([0]), 3, True, 2, 5, 6, 1).tolist()
    [1, 3, 1, 2, 5, 6, 1, 4, 0]
    """
    head = [len(chk_col), nops, int(strict), pos_row, at_anchor, at_taken, n_taken]
    return np.array([*head, *chk_col, *chk_par], np.int64)


def reduction_spec(chk_col: np.ndarray, chk_par: np.ndarray, vrow: int, op: int
                   ) -> np.ndarray:
    """The spec of a reduction (see :func:`reductions`)."""
    head = [len(chk_col), vrow, op, 0, 0, 0, 0]
    return np.array([*head, *chk_col, *chk_par], np.int64)


@cuda.jit(device=True)
def _fits(enc, phys, seqs, s, spec):  # pragma: no cover - device code
    nchk = spec[_NCHK]
    for c in range(nchk):
        if enc[spec[_CHECKS + c], phys] != seqs[s, _PARAMS + spec[_CHECKS + nchk + c]]:
            return False
    return True


@cuda.jit(device=True)
def _combine(op, a, b):  # pragma: no cover - device code
    """``op`` of two partial values; a NaN wins the minimum and the maximum."""
    if op == MIN:
        return a if a < b or a != a else b
    if op == MAX:
        return a if a > b or a != a else b
    return a + b


@cuda.jit(device=True)
def _neutral(op):  # pragma: no cover - device code
    if op == MIN:
        return math.inf
    if op == MAX:
        return -math.inf
    return 0.0


def stack_depth(ops: np.ndarray) -> int:
    """The deepest the stack of the predicate program ``ops`` grows (at least 1).

    >>> from specula.detectors.rules._cdp_plan import program
    >>> from specula.detectors.rules.engine import resolved_predicates
    >>> from specula.detectors.rules.parser import parse_rule
    >>> rule = parse_rule("define X() from C() as c and each B(v * 2 > c.v + c.w) within 5 "
    ...                   "from c")
    >>> ops, _ = program(resolved_predicates(rule, 1), 1, [(0, "v"), (0, "w")], lambda a: 0)
    >>> stack_depth(ops), stack_depth(ops[:0])
    (3, 1)
    """
    depth = deepest = 0
    for code in ops[:, 0]:
        if code in (OP_CONST, OP_CTX, OP_NUM, OP_TS):
            depth += 1
        else:  # REQUIRE pops one; arithmetic and comparisons pop two and push one
            depth -= 1
        deepest = max(deepest, depth)
    return max(1, deepest)


@cache
def selections(depth: int):
    """The selection kernels for predicate programs whose stack holds ``depth`` values
    (a local array, so its size is fixed when the kernel compiles).

    Each takes the column (``ts``, ``enc``, ``num`` rings), the sequences (``seqs``, and
    ``ctx``: the values the program reads from earlier elements), the step's spec
    (:func:`step_spec`: its checks, ``nops`` rows of ``ops`` in use, the ties policy)
    and its program (``ops``, ``consts``). With ``strict`` false a candidate at the
    sequence's anchor time stamp (``seqs[s, at_anchor]``) is refused when its position
    key (``enc[pos_row]``) is among the ``n_taken`` keys of the sequence's elements
    (``seqs[s, at_taken:]``). A candidate passes when it passes the checks, the ties
    rule and the program, as in
    :func:`~specula.detectors.rules._cdp_kernels.step_general`.

    A multiple selection (``each``) writes every passing ``(sequence, event)`` pair in
    the order of the CPU engine (by sequence, then event), with no sort, no atomics and
    no barrier, in three launches. The windows are cut in *slots* of a block's ``tpb``
    events: sequence ``s`` has ``ceil((hi - lo) / tpb)`` of them, from slot
    ``seqs[s, result]`` on (the caller numbers them). ``flag_select`` sets
    ``flags[slot * tpb + t]`` to whether the slot's ``t``-th event passes;
    :func:`scans`' kernel turns the slots' counts into offsets and their total;
    :func:`write_pairs` writes each passing pair at its slot's offset plus the number of
    passing events before it in the slot. ``single_select`` makes ``seqs[s, result]``
    the greatest (``last``, atomic max over -1) or smallest (atomic min over a
    sentinel) passing event of sequence ``s``.
    """

    @cuda.jit(device=True)
    def _passes(ts, enc, num, phys, seqs, s, ctx, spec, ops,
                consts):  # pragma: no cover - device code
        if not _fits(enc, phys, seqs, s, spec):
            return False
        if not spec[_STRICT] and ts[phys] == seqs[s, spec[_AT_ANCHOR]]:
            key = enc[spec[_POS_ROW], phys]
            at_taken = spec[_AT_TAKEN]
            for q in range(spec[_N_TAKEN]):
                if seqs[s, at_taken + q] == key:
                    return False
        nops = spec[_NOPS]
        if nops == 0:
            return True
        stack = cuda.local.array(depth, float64)
        return _holds(ops, consts, nops, stack, ts, num, phys, ctx, s)

    @cuda.jit(device=True)
    def _passing(ts, enc, num, head, cap, seqs, s, ctx, spec, ops,
                 consts):  # pragma: no cover - device code
        # This thread's candidate of sequence ``s``: its logical index when it lies in
        # the sequence's range and passes, else -1.
        j = seqs[s, _LO] + cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if j < seqs[s, _HI] and _passes(ts, enc, num, (head + j) % cap, seqs, s, ctx, spec,
                                        ops, consts):
            return j
        return -1

    @cuda.jit
    def flag_select(ts, enc, num, head, cap, seqs, m, ctx, spec, ops, consts,
                    flags):  # pragma: no cover - device code
        s = cuda.blockIdx.y
        while s < m:
            if _in_window(seqs, s):
                j = _passing(ts, enc, num, head, cap, seqs, s, ctx, spec, ops, consts)
                flags[_flag_at(seqs, s)] = 1 if j >= 0 else 0
            s += cuda.gridDim.y

    @cuda.jit
    def single_select(ts, enc, num, head, cap, seqs, m, ctx, spec, ops, consts,
                      last):  # pragma: no cover - device code
        s = cuda.blockIdx.y
        while s < m:
            j = _passing(ts, enc, num, head, cap, seqs, s, ctx, spec, ops, consts)
            if j >= 0:
                if last:
                    cuda.atomic.max(seqs, (s, _RESULT), j)
                else:
                    cuda.atomic.min(seqs, (s, _RESULT), j)
            s += cuda.gridDim.y

    return flag_select, single_select


@cuda.jit(device=True)
def _in_window(seqs, s):  # pragma: no cover - device code
    """Whether this block's slot of sequence ``s`` holds events."""
    return cuda.blockIdx.x * cuda.blockDim.x < seqs[s, _HI] - seqs[s, _LO]


@cuda.jit(device=True)
def _flag_at(seqs, s):  # pragma: no cover - device code
    """This thread's place in the flags: its block's slot of ``s``, then its own."""
    return (seqs[s, _RESULT] + cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x


@cuda.jit
def write_pairs(seqs, m, flags, offsets, out):  # pragma: no cover - device code
    """Write each passing ``(sequence, event)`` pair flagged by ``flag_select`` (see
    :func:`selections`) to ``out``, at its slot's offset plus the passing events before
    it in the slot; launched on the grid of ``flag_select``."""
    s = cuda.blockIdx.y
    while s < m:
        if _in_window(seqs, s):
            at = _flag_at(seqs, s)
            if flags[at]:
                slot_start = at - cuda.threadIdx.x
                k = offsets[at // cuda.blockDim.x]
                for t in range(slot_start, at):
                    k += flags[t]
                out[k, 0] = s
                out[k, 1] = seqs[s, _LO] + cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        s += cuda.gridDim.y


@cache
def _block_scan(tpb: int):
    """A device function ``before(shared, value)``: the sum of ``value`` over the
    block's threads before this one (an exclusive scan, Hillis and Steele's doubling, in
    the ``tpb`` slots of ``shared``). Every thread of the block must call it."""

    @cuda.jit(device=True)
    def before(shared, value):  # pragma: no cover - device code
        if tpb == 1:
            return 0
        tx = cuda.threadIdx.x
        shared[tx] = value
        cuda.syncthreads()
        step = 1
        while step < tpb:
            add = shared[tx - step] if tx >= step else 0
            cuda.syncthreads()
            shared[tx] += add
            cuda.syncthreads()
            step *= 2
        out = shared[tx] - value
        cuda.syncthreads()
        return out

    return before


@cache
def scans(tpb: int):
    """A kernel ``slot_offsets(flags, width, n, offsets, total)`` for one block of
    ``tpb`` threads: slot ``i < n`` counts the ``width`` flags (int32, so that the
    simulator's NumPy arithmetic cannot overflow them) from ``flags[i * width]`` on;
    ``offsets[i]`` becomes the sum of the counts of the slots before it and ``total[0]``
    the sum of all ``n`` (with ``width`` 1, an exclusive scan of ``flags``).
    Each thread counts a contiguous chunk of slots, the block scans the chunks' sums,
    and each thread writes its chunk's offsets."""
    before = _block_scan(tpb)

    @cuda.jit
    def slot_offsets(flags, width, n, offsets, total):  # pragma: no cover - device code
        sums = cuda.shared.array(tpb, int64)
        tx = cuda.threadIdx.x
        chunk = (n + tpb - 1) // tpb
        a = min(tx * chunk, n)
        b = min(a + chunk, n)
        acc = 0
        for i in range(a, b):
            count = 0
            for f in range(i * width, (i + 1) * width):
                count += flags[f]
            offsets[i] = count
            acc += count
        run = before(sums, acc)
        if tx == tpb - 1:
            total[0] = run + acc
        for i in range(a, b):
            count = offsets[i]
            offsets[i] = run
            run += count

    return slot_offsets


_holds = cuda.jit(device=True)(run_program)
"""The predicate program over a device column: the CPU engines' interpreter
(:func:`~specula.detectors.rules._cdp_kernels.run_program`) compiled for the device."""


@cuda.jit
def scatter(stage_ts, stage_enc, n_enc, stage_num, n_num, w, ring_ts, ring_enc, ring_num,
            pos, cap):  # pragma: no cover - device code
    """Copy ``w`` staged events (their time stamps, and row ``a`` of each kind at
    ``a * w``) into a ring from physical index ``pos`` on, wrapping around at ``cap``."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < w:
        phys = (pos + i) % cap
        ring_ts[phys] = stage_ts[i]
        for a in range(n_enc):
            ring_enc[a, phys] = stage_enc[a * w + i]
        for a in range(n_num):
            ring_num[a, phys] = stage_num[a * w + i]


@cache
def reductions(tpb: int):
    """The two reduction kernels for blocks of ``tpb`` threads (a power of two).

    ``reduce_column`` gives one partial ``(value, count)`` per block and sequence (its
    spec, :func:`reduction_spec`, names the checks, the value's row and the operation): each
    thread reads events ``x`` and ``x + tpb`` of its block's ``2 * tpb``, the fitting
    ones enter the tree in shared memory, and thread 0 writes the block's result.
    ``reduce_partials`` folds the first ``n`` partials the same way; the caller applies
    it until one partial per sequence is left (sec. 5.4, recursive over blocks).
    Partials are block-major: ``out_value[block, s]``, so the final results are row 0.
    """

    @cuda.jit(device=True)
    def _block_result(value, count, acc, c, op, out_value, out_count,
                      s):  # pragma: no cover - device code
        """Put each thread's ``acc, c`` in the shared arrays, halve them until slot 0
        holds the block's result, and let thread 0 write it to ``out_*[s, block]``."""
        tx = cuda.threadIdx.x
        value[tx] = acc
        count[tx] = c
        cuda.syncthreads()
        stride = tpb // 2
        while stride > 0:
            if tx < stride:
                value[tx] = _combine(op, value[tx], value[tx + stride])
                count[tx] += count[tx + stride]
            cuda.syncthreads()
            stride //= 2
        if tx == 0:
            out_value[cuda.blockIdx.x, s] = value[0]
            out_count[cuda.blockIdx.x, s] = count[0]

    @cuda.jit
    def reduce_column(enc, num, head, cap, seqs, m, spec, out_value,
                      out_count):  # pragma: no cover - device code
        value = cuda.shared.array(tpb, float64)
        count = cuda.shared.array(tpb, int64)
        tx = cuda.threadIdx.x
        vrow, op = spec[_VROW], spec[_OP]
        s = cuda.blockIdx.y
        while s < m:
            acc = _neutral(op)
            c = 0
            j = seqs[s, _LO] + cuda.blockIdx.x * 2 * tpb + tx
            for _ in range(2):
                if j < seqs[s, _HI]:
                    phys = (head + j) % cap
                    if _fits(enc, phys, seqs, s, spec):
                        c += 1
                        if vrow >= 0:
                            acc = _combine(op, acc, num[vrow, phys])
                j += tpb
            _block_result(value, count, acc, c, op, out_value, out_count, s)
            cuda.syncthreads()
            s += cuda.gridDim.y

    @cuda.jit
    def reduce_partials(in_value, in_count, n, m, op, out_value,
                        out_count):  # pragma: no cover - device code
        value = cuda.shared.array(tpb, float64)
        count = cuda.shared.array(tpb, int64)
        tx = cuda.threadIdx.x
        s = cuda.blockIdx.y
        while s < m:
            acc = _neutral(op)
            c = 0
            j = cuda.blockIdx.x * 2 * tpb + tx
            for _ in range(2):
                if j < n:
                    acc = _combine(op, acc, in_value[j, s])
                    c += in_count[j, s]
                j += tpb
            _block_result(value, count, acc, c, op, out_value, out_count, s)
            cuda.syncthreads()
            s += cuda.gridDim.y

    return reduce_column, reduce_partials


NO_INDEX_FIRST = np.iinfo(np.int64).max
"""Initial index of a ``first`` selection (no event found)."""
