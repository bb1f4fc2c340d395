"""Numba kernels of the CDP engine on CPU: arrays and scalars in, arrays and scalars out.

They are private; :class:`specula.detectors.rules.cdp.CDPEngine` validates inputs and
wraps them. The AIP engine's kernel (:mod:`~specula.detectors.rules._aip_kernels`)
reuses :func:`lower`, :func:`pair`, :func:`blocked`, :func:`next_fit` and
:func:`holds`, and its aggregates run on :func:`reduce`.

A column is the live part of a store: ``ts`` (ascending, int64), ``enc`` (one row per
encoded attribute, one column per event: parameter values as int64 keys, see
:data:`NAN_KEY`) and ``num`` (one row per aggregated attribute, float64). Events sit in
stream order, so column index order is position order.

A partial sequence ``s`` is its anchor time stamp ``anchor[s]`` (the time stamp of the
element chosen last) and the parameter values bound so far, ``bound[s, :]``. A
*check* ``c`` compares attribute row ``chk_col[c]`` with parameter ``chk_par[c]``;
``chk_nan[c]`` says the parameter holds float keys, where :data:`NAN_KEY` (a NaN) equals
nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specula.detectors.rules._cdp_index import head
from specula.events.row_bytes import (
    KIND_I4,
    KIND_I8,
    bits_of,
    copy_bytes,
    float_at,
    int_at,
)

EACH, LAST, FIRST = 0, 1, 2
"""Selection codes of :func:`step`."""

SUM, MIN, MAX = 0, 1, 2
"""Combining operators of :func:`reduce` (Count and Avg use SUM and the count)."""

NAN_KEY = np.int64(0x7FF8000000000000)
"""Key of a NaN float parameter value (the bits of the canonical NaN)."""

_BLOCK = 64


@njit(cache=True, nogil=True)
def lower(ts, lo, hi, x):  # pragma: no cover - jit
    """First index in ``[lo, hi)`` with ``ts >= x`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if ts[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def blocked(bound, s, chk_par, chk_nan):  # pragma: no cover - jit
    """Whether sequence ``s`` checks a NaN parameter value, which no event equals."""
    for c in range(chk_par.shape[0]):  # noqa: SIM110 - loops compile best in Numba
        if chk_nan[c] and bound[s, chk_par[c]] == NAN_KEY:
            return True
    return False


@njit(cache=True, nogil=True)
def _fits(enc, j, bound, s, chk_col, chk_par):  # pragma: no cover - jit
    for c in range(chk_col.shape[0]):  # noqa: SIM110 - loops compile best in Numba
        if enc[chk_col[c], j] != bound[s, chk_par[c]]:
            return False
    return True


@njit(cache=True, nogil=True)
def _seek(row, j, stop, inc, target):  # pragma: no cover - jit
    """First index from ``j`` on (moving by ``inc``, before ``stop``) where ``row`` holds
    ``target``; ``stop`` if none. Blocks of :data:`_BLOCK` values are tested whole first,
    a loop without early exit that the compiler vectorises."""
    if inc > 0:
        while stop - j >= _BLOCK:
            block = row[j:j + _BLOCK]
            hits = 0
            for q in range(_BLOCK):
                hits += block[q] == target
            if hits:
                break
            j += _BLOCK
    else:
        while j - stop >= _BLOCK:
            block = row[j + 1 - _BLOCK:j + 1]
            hits = 0
            for q in range(_BLOCK):
                hits += block[q] == target
            if hits:
                break
            j -= _BLOCK
    while j != stop and row[j] != target:
        j += inc
    return j


@njit(cache=True, nogil=True)
def next_fit(enc, j, stop, inc, bound, s, chk_col, chk_par):  # pragma: no cover - jit
    """First event from ``j`` on (moving by ``inc``, before ``stop``) that passes the
    checks of sequence ``s``; ``stop`` if none. The first check's attribute row is
    searched, the other checks are tested where it holds."""
    if chk_col.shape[0] == 0:
        return j
    row = enc[chk_col[0]]
    target = bound[s, chk_par[0]]
    while True:
        j = _seek(row, j, stop, inc, target)
        if j == stop or _fits(enc, j, bound, s, chk_col, chk_par):
            return j
        j += inc


@njit(cache=True, nogil=True)
def chain(slot_key, slot_pos, link, off, key, ts, low, high, buf):  # pragma: no cover - jit
    """The live indexes of the events with indexed key ``key`` and ``low <= ts < high``,
    in ``buf`` from the newest (doubled when full); returns ``buf`` and their number.
    See :mod:`~specula.detectors.rules._cdp_index`."""
    k = 0
    j = head(slot_key, slot_pos, link, off, key, ts, high)
    while j >= 0 and ts[j] >= low:
        if k == buf.shape[0]:
            buf = _grow(buf, 2 * k)
        buf[k] = j
        k += 1
        j = link[j] - off
    return buf, k


@njit(cache=True, nogil=True)
def step(ts, enc, anchor, bound, chk_col, chk_par, chk_nan, bind_col, bind_par, window,
         selection, slot_key, slot_pos, link, off):  # pragma: no cover - jit
    """Extend every partial sequence with the events of one column (Alg. 2, one level).

    The candidates of sequence ``s`` are the events ``j`` with
    ``anchor[s] - window <= ts[j] < anchor[s]`` (two binary searches) that pass the
    checks. ``EACH`` takes all of them in position order, ``LAST`` the latest and
    ``FIRST`` the earliest; single selection stops at the first candidate that fits.
    When ``slot_key`` is not empty, the first check's row has an equality index
    (``slot_key``, ``slot_pos``, the live ``link`` and ``off``, see
    :meth:`~specula.detectors.rules._cdp_columns.Store.index_of`) and only the events
    holding the sequence's key are visited.

    Returns ``parent`` (the extended sequence), ``chosen`` (the column index of the new
    element), the new ``bound`` matrix (the parent's values, plus ``bind_par[b]`` taken
    from attribute row ``bind_col[b]`` of the chosen event) and the new anchors. The
    output is ordered by ``(parent, chosen)``.
    """
    m = anchor.shape[0]
    n = ts.shape[0]
    cap = max(16, m)
    parent = np.empty(cap, np.int64)
    chosen = np.empty(cap, np.int64)
    indexed = slot_key.shape[0] > 0 and chk_col.shape[0] > 0
    buf = np.empty(16, np.int64)
    k = 0
    for s in range(m):
        if blocked(bound, s, chk_par, chk_nan):
            continue
        key = bound[s, chk_par[0]] if indexed else 0
        if indexed and selection == LAST:
            low = anchor[s] - window
            j = head(slot_key, slot_pos, link, off, key, ts, anchor[s])
            while j >= 0 and ts[j] >= low and not _fits(enc, j, bound, s, chk_col, chk_par):
                j = link[j] - off
            if j >= 0 and ts[j] >= low:
                parent, chosen, k = pair(parent, chosen, k, s, j)
            continue
        if indexed:
            buf, c = chain(slot_key, slot_pos, link, off, key, ts, anchor[s] - window,
                           anchor[s], buf)
            for q in range(c - 1, -1, -1):
                if _fits(enc, buf[q], bound, s, chk_col, chk_par):
                    parent, chosen, k = pair(parent, chosen, k, s, buf[q])
                    if selection != EACH:
                        break
            continue
        lo = lower(ts, 0, n, anchor[s] - window)
        hi = lower(ts, lo, n, anchor[s])
        if selection == LAST:
            stop = lo - 1
            j = next_fit(enc, hi - 1, stop, -1, bound, s, chk_col, chk_par)
        else:
            stop = hi
            j = next_fit(enc, lo, stop, 1, bound, s, chk_col, chk_par)
        while j != stop:
            parent, chosen, k = pair(parent, chosen, k, s, j)
            if selection != EACH:
                break
            j = next_fit(enc, j + 1, stop, 1, bound, s, chk_col, chk_par)
    parent = parent[:k].copy()
    chosen = chosen[:k].copy()
    out = np.empty((k, bound.shape[1]), np.int64)
    new_anchor = np.empty(k, np.int64)
    for r in range(k):
        out[r, :] = bound[parent[r], :]
        for b in range(bind_col.shape[0]):
            out[r, bind_par[b]] = enc[bind_col[b], chosen[r]]
        new_anchor[r] = ts[chosen[r]]
    return parent, chosen, out, new_anchor


@njit(cache=True, nogil=True)
def pair(parent, chosen, k, s, j):  # pragma: no cover - jit
    """Append the pair (sequence ``s``, event ``j``) at ``k``, doubling the arrays when
    full; return them and the new count."""
    if k == parent.shape[0]:
        parent = _grow(parent, 2 * k)
        chosen = _grow(chosen, 2 * k)
    parent[k] = s
    chosen[k] = j
    return parent, chosen, k + 1


@njit(cache=True, nogil=True)
def _grow(a, cap):  # pragma: no cover - jit
    out = np.empty(cap, a.dtype)
    out[:a.shape[0]] = a
    return out


@njit(cache=True, nogil=True)
def reduce(ts, enc, num, vrow, start, stop, bound, chk_col, chk_par, chk_nan,
           op, slot_key, slot_pos, link, off):  # pragma: no cover - jit
    """Aggregate, for every match ``s``, the events ``j`` with
    ``start[s] <= ts[j] < stop[s]`` that pass the checks.

    Returns ``value`` (the ``op`` of ``num[vrow, j]`` in position order; 0, +inf or
    -inf when nothing qualifies; 0 when ``vrow < 0``; a NaN value makes the minimum and
    the maximum NaN, as it does the sum) and ``count``. The equality index, when given,
    is used as in :func:`step`.
    """
    m = start.shape[0]
    n = ts.shape[0]
    value = np.empty(m, np.float64)
    count = np.zeros(m, np.int64)
    indexed = slot_key.shape[0] > 0 and chk_col.shape[0] > 0
    buf = np.empty(16, np.int64)
    for s in range(m):
        if op == MIN:
            acc = np.inf
        elif op == MAX:
            acc = -np.inf
        else:
            acc = 0.0
        c = 0
        if blocked(bound, s, chk_par, chk_nan):
            pass
        elif indexed:
            buf, got = chain(slot_key, slot_pos, link, off, bound[s, chk_par[0]], ts,
                             start[s], stop[s], buf)
            for q in range(got - 1, -1, -1):
                j = buf[q]
                if _fits(enc, j, bound, s, chk_col, chk_par):
                    c += 1
                    acc = _combine(acc, num, vrow, j, op)
        else:
            lo = lower(ts, 0, n, start[s])
            hi = lower(ts, lo, n, stop[s])
            j = lo
            while True:
                j = next_fit(enc, j, hi, 1, bound, s, chk_col, chk_par)
                if j == hi:
                    break
                c += 1
                acc = _combine(acc, num, vrow, j, op)
                j += 1
        value[s] = acc
        count[s] = c
    return value, count


@njit(cache=True, nogil=True)
def _combine(acc, num, vrow, j, op):  # pragma: no cover - jit
    """``acc`` combined by ``op`` with value ``num[vrow, j]`` (unchanged when ``vrow``
    is negative: a count)."""
    if vrow < 0:
        return acc
    x = num[vrow, j]
    if op == MIN:
        return x if (x < acc or x != x) else acc
    if op == MAX:
        return x if (x > acc or x != x) else acc
    return acc + x


# ----------------------------------------------------------- predicates and ties

OP_CONST, OP_CTX, OP_NUM, OP_TS, OP_REQUIRE = 0, 1, 2, 3, 4
OP_ADD, OP_SUB, OP_MUL, OP_DIV = 5, 6, 7, 8
OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE = 9, 10, 11, 12, 13, 14
"""Opcodes of a predicate program: rows ``(opcode, argument)`` run on a float64 stack.
``CONST k`` pushes ``consts[k]``, ``CTX q`` the sequence's context value ``q`` (an
attribute of an element chosen before), ``NUM r`` the candidate's aggregated-value row
``r``, ``TS`` its time stamp; arithmetic and comparisons pop two values and push one
(comparisons push 1.0 or 0.0); ``REQUIRE`` pops one and fails the candidate if it is 0."""

NO_FLOOR = np.int64(-(2**62))


def run_program(ops, consts, nops, stack, ts, num, j, ctx, s):  # pragma: no cover - jit
    """Whether candidate ``j`` of sequence ``s`` passes the first ``nops`` rows of the
    predicate program ``ops``. Plain Python, compiled twice: :func:`holds` for the CPU
    engines, and as a CUDA device function by the GPU engine's kernels, so both read a
    program alike."""
    sp = 0
    for q in range(nops):
        code = ops[q, 0]
        arg = ops[q, 1]
        if code == OP_CONST:
            stack[sp] = consts[arg]
            sp += 1
        elif code == OP_CTX:
            stack[sp] = ctx[s, arg]
            sp += 1
        elif code == OP_NUM:
            stack[sp] = num[arg, j]
            sp += 1
        elif code == OP_TS:
            stack[sp] = float(ts[j])
            sp += 1
        elif code == OP_REQUIRE:
            sp -= 1
            if stack[sp] == 0.0:
                return False
        else:
            sp -= 1
            b = stack[sp]
            a = stack[sp - 1]
            if code == OP_ADD:
                r = a + b
            elif code == OP_SUB:
                r = a - b
            elif code == OP_MUL:
                r = a * b
            elif code == OP_DIV:
                r = a / b
            elif code == OP_EQ:
                r = 1.0 if a == b else 0.0
            elif code == OP_NE:
                r = 1.0 if a != b else 0.0
            elif code == OP_LT:
                r = 1.0 if a < b else 0.0
            elif code == OP_LE:
                r = 1.0 if a <= b else 0.0
            elif code == OP_GT:
                r = 1.0 if a > b else 0.0
            else:
                r = 1.0 if a >= b else 0.0
            stack[sp - 1] = r
    return True


holds = njit(cache=True, nogil=True, error_model="numpy")(run_program)
"""The CPU engines' :func:`run_program`."""


@njit(cache=True, nogil=True, error_model="numpy")
def step_general(ts, enc, num, anchor, floor, bound, ctx, taken, chk_col, chk_par, chk_nan,
                 bind_col, bind_par, window, selection, strict, pos_row, ops, consts,
                 fill_slot, fill_row, slot_key, slot_pos, link, off, parent, chosen,
                 new_bound, new_anchor, new_floor, new_ctx, new_taken):  # pragma: no cover - jit
    """:func:`step` with predicates, a floor and either ties policy.

    The candidates of sequence ``s`` are the events ``j`` with
    ``max(anchor[s] - window, floor[s]) <= ts[j]`` and ``ts[j] < anchor[s]`` (``strict``)
    or ``ts[j] <= anchor[s]`` and ``j`` not yet in the sequence (``taken[s]`` holds the
    position keys of its elements; ``enc[pos_row]`` those of the column), that pass
    the parameter checks and the predicate program ``ops``. ``ctx[s]`` holds the values
    the programs read from earlier elements; the chosen event fills context slot
    ``fill_slot[f]`` from its value row ``fill_row[f]`` (-1: its time stamp). The
    equality index, when given, is used as in :func:`step`.

    The new sequences go to the caller's buffers, ``k`` rows each: ``parent``,
    ``chosen`` and the new ``bound``, ``anchor``, ``floor``, ``ctx`` and ``taken`` (the
    parent's, with the chosen event's key appended); the buffers are reused from call
    to call, so a step returns no array (boxing one costs more than a step of a few
    sequences). Returns ``k``, or ``-k`` when ``k`` is more than the buffers hold: the
    caller grows them and calls again (the inputs are only read).
    """
    return _extend(ts, enc, num, anchor, floor, bound, ctx, taken, chk_col, chk_par, chk_nan,
                   bind_col, bind_par, (window, selection, strict, pos_row, True), ops, consts,
                   fill_slot, fill_row, slot_key, slot_pos, link, off, parent, chosen,
                   new_bound, new_anchor, new_floor, new_ctx, new_taken)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _extend(ts, enc, num, anchor, floor, bound, ctx, taken, chk_col, chk_par, chk_nan,
            bind_col, bind_par, how, ops, consts, fill_slot, fill_row, slot_key, slot_pos,
            link, off, parent, chosen, new_bound, new_anchor, new_floor, new_ctx,
            new_taken):  # pragma: no cover - jit
    """:func:`step_general`, its window, selection, ties policy and position row in
    ``how``: fewer than 31 parameters, so that Python passes them one by one and Numba
    can inline it into :func:`sequences`, where a call would count every array it
    passes up and down (atomic reference counts, ~1 us a detection). The last entry of
    ``how``, ``carry``, says whether a later step reads the new sequences' anchors,
    floors, context values and position keys; without it only ``parent``, ``chosen``
    and ``new_bound`` are written (the last step of a chain)."""
    window, selection, strict, pos_row, carry = how
    m = anchor.shape[0]
    n = ts.shape[0]
    cap = parent.shape[0]
    stack = np.empty(max(1, ops.shape[0]), np.float64)
    indexed = slot_key.shape[0] > 0 and chk_col.shape[0] > 0
    buf = np.empty(16, np.int64)
    checks = chk_col.shape[0] > 0
    program = ops.shape[0] > 0
    k = 0
    for s in range(m):
        if checks and blocked(bound, s, chk_par, chk_nan):
            continue
        low = anchor[s] - window
        if floor[s] > low:
            low = floor[s]
        high = anchor[s] if strict else anchor[s] + 1
        c = q = at = stop = inc = 0
        if indexed and selection == LAST:  # the events holding the key, newest first
            at = head(slot_key, slot_pos, link, off, bound[s, chk_par[0]], ts, high)
        elif indexed:  # the same, gathered to be visited oldest first
            buf, c = chain(slot_key, slot_pos, link, off, bound[s, chk_par[0]], ts, low, high,
                           buf)
        else:  # the window, scanned from the end the selection starts at
            lo = lower(ts, 0, n, low)
            hi = lower(ts, lo, n, high)
            if selection == LAST:
                stop, inc, at = lo - 1, -1, hi - 1
            else:
                stop, inc, at = hi, 1, lo
        while True:  # the candidates in the selection's order
            if indexed and selection == LAST:
                if at < 0 or ts[at] < low:
                    break
                j = at
                at = link[at] - off
                if not _fits(enc, j, bound, s, chk_col, chk_par):
                    continue
            elif indexed:
                if q == c:
                    break
                j = buf[c - 1 - q]
                q += 1
                if not _fits(enc, j, bound, s, chk_col, chk_par):
                    continue
            else:
                if checks:
                    at = next_fit(enc, at, stop, inc, bound, s, chk_col, chk_par)
                if at == stop:
                    break
                j = at
                at += inc
            # whether j may extend s: not already one of its elements (an equal time
            # stamp under ties nonstrict) and passing the program; written out here, as
            # a call that passes these arrays costs more than the test (reference counts)
            fit = True
            if not strict and ts[j] == anchor[s]:
                key = enc[pos_row, j]
                for e in range(taken.shape[1]):
                    if taken[s, e] == key:
                        fit = False
            if fit and program:
                fit = holds(ops, consts, ops.shape[0], stack, ts, num, j, ctx, s)
            if fit:
                k = _put(parent, chosen, k, cap, s, j)
                if selection != EACH:
                    break
    if k > cap:
        return -k
    width = taken.shape[1]
    for r in range(k):
        p = parent[r]
        c = chosen[r]
        for q in range(bound.shape[1]):  # element by element: a slice costs more here
            new_bound[r, q] = bound[p, q]
        for b in range(bind_col.shape[0]):
            new_bound[r, bind_par[b]] = enc[bind_col[b], c]
        if not carry:
            continue
        new_anchor[r] = ts[c]
        new_floor[r] = floor[p]
        for q in range(ctx.shape[1]):
            new_ctx[r, q] = ctx[p, q]
        for f in range(fill_slot.shape[0]):
            new_ctx[r, fill_slot[f]] = ts[c] if fill_row[f] < 0 else num[fill_row[f], c]
        for q in range(width):
            new_taken[r, q] = taken[p, q]
        new_taken[r, width] = enc[pos_row, c] if pos_row >= 0 else 0
    return k


@njit(cache=True, nogil=True)
def _put(parent, chosen, k, cap, s, j):  # pragma: no cover - jit
    """Write the pair (sequence ``s``, event ``j``) at ``k`` if the buffers hold it;
    return the new count, which goes on past ``cap`` to say how much room is needed."""
    if k < cap:
        parent[k] = s
        chosen[k] = j
    return k + 1


# ---------------------------------------------------------- every step in one call

T_ROW, T_ELEMENT, T_TS, T_PRODUCER, T_SEQ, T_SHIFT, T_WINDOW, T_STRICT = 0, 1, 2, 3, 4, 5, 6, 7
T_SLOTS, T_BINDS, T_FILLS = 8, 9, 11
T_WIDTH = 13
"""Entries of a chain's head in its step table (see :func:`sequences`): the width of a
row of the columns and of an element, the byte offsets of ``ts``, ``producer`` (int32)
and ``seq`` in a row, the shift of a position key, the pattern window (negative: none),
whether ties are strict, the number of context slots, and the ``[start, stop)`` of the
terminator's binds (rows of :data:`BIND_WIDTH`: byte offset, kind, float flag,
parameter) and context fills (rows of :data:`FILL_WIDTH`: byte offset, kind, slot) in
the table."""
BIND_WIDTH, FILL_WIDTH = 4, 3

S_WINDOW, S_SELECTION, S_POS_ROW, S_FLOOR = 0, 1, 2, 3
S_CHK_COL, S_CHK_PAR, S_CHK_NAN, S_BIND_COL, S_BIND_PAR = 4, 6, 8, 10, 12
S_OPS, S_CONSTS, S_FILL_SLOT, S_FILL_ROW = 14, 16, 18, 20
S_WIDTH = 22
"""Columns of a step's row in a chain's step table (see :func:`sequences`; row ``d``
starts at ``T_WIDTH + d * S_WIDTH``): the window, selection, position-key row (-1: none)
and floor flag of a step, then the ``[start, stop)`` of each of its arrays: the checks'
columns and parameters, binds' columns and parameters, program (two entries a row) and
context fills in the table itself, the checks' NaN flags in ``nan``, the program's
constants in ``consts``."""


@njit(cache=True, nogil=True, error_model="numpy")
def sequences(ts_t, enc_t, num_t, link_t, key_t, pos_t, rows_t, live, steps, nan, consts,
              terms, tidx, term_out, elements, bound_out):  # pragma: no cover - jit
    """A detection: every step of a chain (Alg. 2, all levels) from the terminators, in
    one call that also writes the matches' elements: a step's dispatch from Python, or a
    NumPy call on a match's few rows, costs more than the step itself on the few
    sequences of a live feed's terminator.

    Step ``d`` scans the column ``ts_t[d]``, ``enc_t[d]``, ``num_t[d]`` (whole arrays;
    the live part is ``live[d, 0]:live[d, 1]``, the first live event's absolute position
    ``live[d, 2] + live[d, 0]``; ``live[d, 3]`` is the most sequences the step has made
    in a call, kept by the caller and raised here: its buffers start that large, so that
    a step which makes many more sequences than it extends is not run twice), with the
    equality index ``key_t[d]``, ``pos_t[d]``, ``link_t[d]`` (empty keys: none), as
    :func:`step_general` does with row ``d`` of the step table (see :data:`S_WIDTH`; the
    steps' arrays follow the rows in ``steps``, the NaN flags and constants are in
    ``nan`` and ``consts``: three arrays for the chain, as each array passed costs the
    call its dispatch). A step that is not general in the
    plan is the general step with no floor, program or fill, ``strict`` ties and no
    position row, which chooses the same events as :func:`step`. ``rows_t[d]`` holds the
    column's rows as bytes.

    The terminators are ``terms``, their rows as bytes (the columns' row dtype), found at
    ``tidx`` of the batch; the table's head (see :data:`T_WIDTH`) says where their time
    stamp, position, parameters and context values are. Under ``ties nonstrict`` each
    sequence holds its terminator's position key ``producer << shift | seq``. The pattern
    window floors the steps whose floor flag is set.

    Writes, for each complete sequence ``r``: ``term_out[r]``, its terminator's index in
    the batch; ``elements[e, r * w:(r + 1) * w]``, the first ``w`` bytes (an element's
    width) of the row chosen for element ``e`` (0: the terminator); ``bound_out[r]``, its
    parameters. Returns their number ``m`` and the number of partial sequences made, all
    steps together; ``-m`` when the buffers hold fewer than ``m`` (the caller grows them
    and calls again). The sequences come ordered by terminator, then by each step's
    choices in position order, as the steps one at a time give them.
    """
    n_steps = live.shape[0]
    row_w, el_w = steps[T_ROW], steps[T_ELEMENT]
    shift, window, strict = steps[T_SHIFT], steps[T_WINDOW], steps[T_STRICT] != 0
    m = terms.shape[0] // row_w
    anchor = np.empty(m, np.int64)
    bound = np.zeros((m, bound_out.shape[1]), np.int64)
    ctx = np.zeros((m, steps[T_SLOTS]), np.float64)
    carried = np.empty(m, np.int64)
    taken = np.zeros((m, 1), np.int64)
    for s in range(m):
        at = s * row_w
        anchor[s] = int_at(terms, at + steps[T_TS], KIND_I8)
        for b in range(steps[T_BINDS], steps[T_BINDS + 1], BIND_WIDTH):
            if steps[b + 2]:
                bound[s, steps[b + 3]] = float_key(float_at(terms, at + steps[b], steps[b + 1]))
            else:
                bound[s, steps[b + 3]] = int_at(terms, at + steps[b], steps[b + 1])
        for f in range(steps[T_FILLS], steps[T_FILLS + 1], FILL_WIDTH):
            ctx[s, steps[f + 2]] = float_at(terms, at + steps[f], steps[f + 1])
        carried[s] = anchor[s] - window if window >= 0 else NO_FLOOR
        if not strict:
            taken[s, 0] = ((int_at(terms, at + steps[T_PRODUCER], KIND_I4) << shift)
                           | int_at(terms, at + steps[T_SEQ], KIND_I8))
    no_floor = np.full(max(16, m), NO_FLOOR, np.int64)
    links_parent = np.empty(max(16, m * n_steps, live[:, 3].sum()), np.int64)
    links_chosen = np.empty(links_parent.shape[0], np.int64)
    first = np.zeros(n_steps + 1, np.int64)
    partials = 0
    for d in range(n_steps):
        start, end, off = live[d, 0], live[d, 1], live[d, 2] + live[d, 0]
        row = steps[T_WIDTH + d * S_WIDTH:T_WIDTH + (d + 1) * S_WIDTH]
        ops = steps[row[S_OPS]:row[S_OPS + 1]]
        if no_floor.shape[0] < m:
            no_floor = np.full(m, NO_FLOOR, np.int64)
        floor = carried if row[S_FLOOR] else no_floor[:m]
        cap = max(16, m, live[d, 3])
        k = -cap
        while k < 0:
            cap = max(cap, -k)
            parent = np.empty(cap, np.int64)
            chosen = np.empty(cap, np.int64)
            new_bound = np.empty((cap, bound.shape[1]), np.int64)
            new_anchor = np.empty(cap, np.int64)
            new_floor = np.empty(cap, np.int64)
            new_ctx = np.empty((cap, ctx.shape[1]), np.float64)
            new_taken = np.empty((cap, taken.shape[1] + 1), np.int64)
            k = _extend(
                ts_t[d][start:end], enc_t[d][:, start:end], num_t[d][:, start:end], anchor,
                floor, bound, ctx, taken, steps[row[S_CHK_COL]:row[S_CHK_COL + 1]],
                steps[row[S_CHK_PAR]:row[S_CHK_PAR + 1]], nan[row[S_CHK_NAN]:row[S_CHK_NAN + 1]],
                steps[row[S_BIND_COL]:row[S_BIND_COL + 1]],
                steps[row[S_BIND_PAR]:row[S_BIND_PAR + 1]],
                (row[S_WINDOW], row[S_SELECTION], strict, row[S_POS_ROW], d + 1 < n_steps),
                ops.reshape((ops.shape[0] // 2, 2)), consts[row[S_CONSTS]:row[S_CONSTS + 1]],
                steps[row[S_FILL_SLOT]:row[S_FILL_SLOT + 1]],
                steps[row[S_FILL_ROW]:row[S_FILL_ROW + 1]],
                key_t[d], pos_t[d], link_t[d][start:end], off, parent, chosen, new_bound,
                new_anchor, new_floor, new_ctx, new_taken)
        partials += k
        live[d, 3] = max(live[d, 3], k)
        if first[d] + k > links_parent.shape[0]:
            links_parent = _grow(links_parent, 2 * (first[d] + k))
            links_chosen = _grow(links_chosen, links_parent.shape[0])
        for r in range(k):
            links_parent[first[d] + r] = parent[r]
            links_chosen[first[d] + r] = chosen[r]
        if d + 1 < n_steps:
            for r in range(k):  # the window's floor follows every sequence
                new_floor[r] = carried[parent[r]]
        first[d + 1] = first[d] + k
        anchor, carried, bound = new_anchor[:k], new_floor[:k], new_bound[:k]
        ctx, taken = new_ctx[:k], new_taken[:k]
        m = k
        if k == 0:
            break
    if m > term_out.shape[0]:
        return -m, partials
    for r in range(m):
        q = r
        for d in range(n_steps - 1, -1, -1):
            j = live[d, 0] + links_chosen[first[d] + q]
            copy_bytes(rows_t[d], j * row_w, elements[d + 1], r * el_w, el_w)
            q = links_parent[first[d] + q]
        term_out[r] = tidx[q]
        copy_bytes(terms, q * row_w, elements[0], r * el_w, el_w)
        for p in range(bound.shape[1]):
            bound_out[r, p] = bound[r, p]
    return m, partials


@njit(cache=True, nogil=True)
def float_key(f):  # pragma: no cover - jit
    """The parameter key of the float ``f`` (see :data:`NAN_KEY`), as ``encode`` of
    :mod:`~specula.detectors.rules._cdp_columns` gives it."""
    if f != f:
        return NAN_KEY
    return bits_of(f + 0.0)  # + 0.0 folds -0.0 into 0.0
