"""Numba kernels of the ordering unit: arrays and scalars in, arrays and scalars out.

They are private; :mod:`specula.ordering.unit`, :mod:`specula.ordering.kslack`,
:mod:`specula.ordering.speculative` and :mod:`specula.ordering._records` validate inputs
and wrap them.

Time stamps are int64. ``NO_CLOCK`` marks "no clock event seen yet" and ``NO_DELAY``
marks "no delay measured since the last clock update"; both sit far enough from the
int64 limits that the sums below cannot overflow.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specula.events.row_bytes import bits_at, copy_bytes, put_int8

NO_CLOCK = np.int64(-(2**62))
NO_DELAY = np.int64(-(2**62))
#: The clock of a stream that has ended: every input is in, nothing later will come.
END_OF_TIME = np.int64(2**62)


@njit(cache=True, nogil=True)
def clock_step(delay, is_data, proposal, immediate, clk, k, pending):  # pragma: no cover
    """One arrival's effect on the clock and K (see :func:`advance_clock`)."""
    if is_data:
        if immediate:
            if clk != NO_CLOCK and clk + delay > k:
                k = clk + delay
        elif delay > pending:
            pending = delay
    if proposal != NO_CLOCK and (is_data or proposal > clk):
        if proposal > clk:
            clk = proposal
        if pending != NO_DELAY and clk + pending > k:
            k = clk + pending
        pending = NO_DELAY
    return clk, k, pending


@njit(cache=True, nogil=True)
def advance_clock(ts, kplus, proposal, is_data, immediate, clk, k, pending):  # pragma: no cover
    """Clock extraction and dynamic K for a batch of arrivals, in arrival order.

    For every arriving event ``j`` this returns the local clock and K *after* its arrival.
    ``proposal[j]`` is the clock arrival ``j`` proposes (``NO_CLOCK``: none); the clock
    becomes ``max(clk, proposal)``, so it never moves back. The delay of a data event is
    ``clk - ts + kplus``:

    * clocked by its own events (``immediate`` false: a clock event proposes its time
      stamp), the delay is measured against the *new* clock at the next clock update
      (paper sec. 3.2: the delay of an event is known only at the next clock update;
      Fig. 4 sets K = 3 for C1 at A4, not K = 1 at its arrival); ``pending`` is
      ``max(kplus - ts)`` over the data events received since the last update;
    * clocked by its producers' progress (``immediate`` true), the clock already says
      how far every producer has come, so the delay is measured at arrival.

    Control messages (``is_data`` false) carry no delay, and a punctuation (the raw
    stream's clock handed to a level-1 unit, :mod:`specula.ordering.clock`) is a clock
    update only where it moves the clock: one that does not leaves the delays pending
    for the next, as if it had not come.
    """
    n = ts.shape[0]
    clk_out = np.empty(n, np.int64)
    k_out = np.empty(n, np.int64)
    for j in range(n):
        clk, k, pending = clock_step(kplus[j] - ts[j], is_data[j], proposal[j], immediate,
                                     clk, k, pending)
        clk_out[j] = clk
        k_out[j] = k
    return clk_out, k_out, clk, k, pending


@njit(cache=True, nogil=True)
def progress_proposals(producer, ts, proposes, slot, channel):  # pragma: no cover - jit
    """The clock each arrival proposes when a unit is clocked by its input channels.

    ``proposes[j]`` marks arrivals that advance their channel (punctuations, and raw
    clock events where raw input is a channel); ``slot[producer]`` is the channel's
    index in ``channel`` (the channels' clocks, updated in place; -1: not a channel).
    An arrival that advances its channel proposes the minimum over all channels (the
    low watermark), else ``NO_CLOCK``.
    """
    n = ts.shape[0]
    out = np.full(n, NO_CLOCK, np.int64)
    for j in range(n):
        if not proposes[j]:
            continue
        p = producer[j]
        s = slot[p] if p < slot.shape[0] else -1
        if s < 0 or ts[j] <= channel[s]:
            continue
        channel[s] = ts[j]
        out[j] = channel.min()
    return out


@njit(cache=True, nogil=True)
def _key_less(ts_a, tb_a, ts_b, tb_b):  # pragma: no cover - jit
    return ts_a < ts_b or (ts_a == ts_b and tb_a < tb_b)


GENERATED_TB = np.int64(1 << 40)
"""Tie-breaks from this value on belong to generated events (producer >= 1)."""


@njit(cache=True, nogil=True)
def _behind(ts, tb, h_ts, h_tb):  # pragma: no cover - jit
    """Whether an arrival with key ``(ts, tb)`` is late against the horizon: below it,
    or, for a generated event, equal to it. A generated key names one event (producer
    and counter), so a key equal to the horizon is a copy of the purged event; raw
    events may share keys, so for them only a smaller key is late."""
    return _key_less(ts, tb, h_ts, h_tb) or (ts == h_ts and tb == h_tb
                                              and tb >= GENERATED_TB)


@njit(cache=True, nogil=True)
def _less3(a_ts, a_tb, a_ix, b_ts, b_tb, b_ix):  # pragma: no cover - jit
    if a_ts != b_ts:
        return a_ts < b_ts
    if a_tb != b_tb:
        return a_tb < b_tb
    return a_ix < b_ix


@njit(cache=True, nogil=True)
def _heap_push(h_ts, h_tb, h_ix, size, t, b, x):  # pragma: no cover - jit
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _less3(t, b, x, h_ts[parent], h_tb[parent], h_ix[parent]):
            break
        h_ts[i] = h_ts[parent]
        h_tb[i] = h_tb[parent]
        h_ix[i] = h_ix[parent]
        i = parent
    h_ts[i] = t
    h_tb[i] = b
    h_ix[i] = x
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(h_ts, h_tb, h_ix, size):  # pragma: no cover - jit
    size -= 1
    t = h_ts[size]
    b = h_tb[size]
    x = h_ix[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less3(h_ts[c + 1], h_tb[c + 1], h_ix[c + 1], h_ts[c], h_tb[c],
                                   h_ix[c]):
            c += 1
        if not _less3(h_ts[c], h_tb[c], h_ix[c], t, b, x):
            break
        h_ts[i] = h_ts[c]
        h_tb[i] = h_tb[c]
        h_ix[i] = h_ix[c]
        i = c
    h_ts[i] = t
    h_tb[i] = b
    h_ix[i] = x
    return size


@njit(cache=True, nogil=True)
def _int_at(buf, at, size):  # pragma: no cover - jit
    """The signed little-endian integer of ``size`` bytes (4 or 8) at ``buf[at]``."""
    v = bits_at(buf, at, size)
    if size == 4 and v >= 2**31:
        v -= 2**32
    return v


@njit(cache=True, nogil=True)
def kslack_step(keys, head, tail, store, first, run, layout, stamp, arrived, is_clock,
                proposal, immediate, clk, k, pending, h_ts, h_tb, process_late,
                shift):  # pragma: no cover - jit
    """Pure K-slack (alpha = 1) over a run of data events, event by event in arrival order:
    one call per run, which stores the run, orders it and gathers what it emits.

    The events are rows of a batch dtype as bytes: ``run`` the arrivals, ``store`` the
    buffer's store, into which the run is copied at row ``first`` (with ``stamp``, each
    copied row's ``ats`` and ``origin`` set to ``arrived``: raw rows stamped with their
    arrival as they are stored); ``layout`` holds the row width and the byte offsets of
    ``ts``, ``type``, ``producer``, ``seq``, ``kplus``, ``ats`` and ``origin`` (core
    fields: int64, int32, int32, int64, int64, int64, int64).

    ``keys`` has eight rows of one capacity: the buffer is ``keys[0:3, head:tail]``
    (store indices, time stamps, tie-breaks), sorted by (time stamp, tie-break), with
    room for every arrival behind ``tail``; rows 3 and 4 take the store indices of the
    emitted and of the late events, rows 5 to 7 hold the heap below (the capacity is at
    least ``tail + n``). The
    arriving events have store indices ``first + j``, above every buffered one (store
    indices break ties of equal keys: arrival order). Per arrival: the clock proposal is
    the event's time stamp if ``is_clock`` marks its type (ids clipped into the mask),
    else none; with an empty ``is_clock`` it is ``proposal[j]``. The clock and K advance
    as in :func:`advance_clock` (``immediate``); the event is late if its key is below
    the horizon ``(h_ts, h_tb)`` (the key of the last emitted event); then every
    buffered event with ``ts + K <= clk`` is emitted and purged, smallest key first
    (equal keys in arrival order).

    In-order arrivals extend the sorted run at its tail in O(1); arrivals that belong
    further back wait in a binary heap (O(log n)) and are merged into the run at the
    end, from the back, so a call costs what it adds and emits plus the part of the
    buffer behind its earliest out-of-order arrival, never a copy of the whole buffer.

    Returns ``(rows, n_emitted, n_late, head, tail, clk, k, pending, h_ts, h_tb)``:
    ``rows`` the emitted events' bytes in emission order (late events processed out of
    order included, when ``process_late``), whose store indices are
    ``keys[3, :n_emitted]``; the late ones' are ``keys[4, :n_late]``.
    """
    width = layout[0]
    n = run.shape[0] // width
    # unsigned indices here and below: no check for negative ones, so the byte loops
    # vectorise (slices and signed indices copy a byte at a time, ten times slower)
    copy_bytes(run, 0, store, first * width, n * width)
    if stamp:
        for j in range(n):
            put_int8(store, (first + j) * width + layout[6], arrived)
            put_int8(store, (first + j) * width + layout[7], arrived)
    m_ix, m_ts, m_tb, emitted, late = keys[0], keys[1], keys[2], keys[3], keys[4]
    p_ts, p_tb, p_ix = keys[5], keys[6], keys[7]  # the heap of out-of-order arrivals
    by_type = is_clock.shape[0] > 0
    last_type = is_clock.shape[0] - 1
    hs = 0
    ne = 0
    nl = 0
    for j in range(n):
        at = j * width
        t = _int_at(run, at + layout[1], 8)
        b = (_int_at(run, at + layout[3], 4) << shift) | _int_at(run, at + layout[4], 8)
        x = first + j
        if by_type:
            c = min(max(_int_at(run, at + layout[2], 4), 0), last_type)
            p = t if is_clock[c] else NO_CLOCK
        else:
            p = proposal[j]
        clk, k, pending = clock_step(_int_at(run, at + layout[5], 8) - t, True, p, immediate,
                                     clk, k, pending)
        if _behind(t, b, h_ts, h_tb):
            late[nl] = x
            nl += 1
            if process_late:
                emitted[ne] = x
                ne += 1
        elif head == tail or not _key_less(t, b, m_ts[tail - 1], m_tb[tail - 1]):
            m_ts[tail] = t
            m_tb[tail] = b
            m_ix[tail] = x
            tail += 1
        else:
            hs = _heap_push(p_ts, p_tb, p_ix, hs, t, b, x)
        while True:
            from_main = head < tail and (hs == 0 or _less3(
                m_ts[head], m_tb[head], m_ix[head], p_ts[0], p_tb[0], p_ix[0]))
            if from_main:
                if m_ts[head] + k > clk:
                    break
                emitted[ne] = m_ix[head]
                h_ts = m_ts[head]
                h_tb = m_tb[head]
                head += 1
            elif hs > 0:
                if p_ts[0] + k > clk:
                    break
                emitted[ne] = p_ix[0]
                h_ts = p_ts[0]
                h_tb = p_tb[0]
                hs = _heap_pop(p_ts, p_tb, p_ix, hs)
            else:
                break
            ne += 1
    rows = np.empty(ne * width, np.uint8)
    for i in range(ne):
        copy_bytes(store, emitted[i] * width, rows, i * width, width)
    if hs:
        tail = _merge_heap(m_ix, m_ts, m_tb, head, tail, p_ts, p_tb, p_ix, hs)
    return rows, ne, nl, head, tail, clk, k, pending, h_ts, h_tb


@njit(cache=True, nogil=True)
def kslack_plain(keys, head, tail, store, first, run, layout, is_clock, is_input, immediate,
                 clk, k, pending, h_ts, h_tb, process_late, shift):  # pragma: no cover - jit
    """:func:`kslack_step` of a run of data events clocked by type (``is_clock`` not
    empty) when every one is of a type that ``is_input`` marks (ids past it are none):
    a live step's usual batch.

    Returns what :func:`kslack_step` returns and, last, whether an emitted event is a
    generated one (producer not 0); ``n_emitted`` is -1, and nothing is touched, when
    some event is of another type."""
    width = layout[0]
    n = run.shape[0] // width
    for j in range(n):
        t = _int_at(run, j * width + layout[2], 4)
        if t < 0 or t >= is_input.shape[0] or not is_input[t]:
            return (np.empty(0, np.uint8), -1, 0, head, tail, clk, k, pending, h_ts,
                    h_tb, False)
    rows, ne, nl, head, tail, clk, k, pending, h_ts, h_tb = kslack_step(
        keys, head, tail, store, first, run, layout, False, 0, is_clock,
        np.empty(0, np.int64), immediate, clk, k, pending, h_ts, h_tb, process_late, shift)
    generated = False
    for i in range(ne):
        if _int_at(rows, i * width + layout[3], 4) != 0:
            generated = True
    return rows, ne, nl, head, tail, clk, k, pending, h_ts, h_tb, generated


@njit(cache=True, nogil=True)
def _merge_heap(m_ix, m_ts, m_tb, head, tail, p_ts, p_tb, p_ix, hs):  # pragma: no cover - jit
    """The heap, drained in order, merged into the sorted run ``m_*[head:tail]`` from the
    back (in place: the run has room behind its tail for every arrival); returns the
    run's new tail."""
    s_ts = np.empty(hs, np.int64)
    s_tb = np.empty(hs, np.int64)
    s_ix = np.empty(hs, np.int64)
    nh = hs
    for i in range(nh):
        s_ts[i] = p_ts[0]
        s_tb[i] = p_tb[0]
        s_ix[i] = p_ix[0]
        hs = _heap_pop(p_ts, p_tb, p_ix, hs)
    i = tail - 1
    j = nh - 1
    w = tail + nh - 1
    while j >= 0:
        if i >= head and _less3(s_ts[j], s_tb[j], s_ix[j], m_ts[i], m_tb[i], m_ix[i]):
            m_ts[w] = m_ts[i]
            m_tb[w] = m_tb[i]
            m_ix[w] = m_ix[i]
            i -= 1
        else:
            m_ts[w] = s_ts[j]
            m_tb[w] = s_tb[j]
            m_ix[w] = s_ix[j]
            j -= 1
        w -= 1
    return tail + nh


@njit(cache=True, nogil=True)
def keys_behind(ts, tb, key_ts, key_tb):  # pragma: no cover - jit
    """Which of the keys ``(ts, tb)`` are behind the horizon ``(key_ts, key_tb)`` (see
    :func:`_behind`), and how many."""
    n = ts.shape[0]
    out = np.empty(n, np.bool_)
    count = 0
    for j in range(n):
        out[j] = _behind(ts[j], tb[j], key_ts, key_tb)
        count += out[j]
    return out, count


@njit(cache=True, nogil=True)
def merge_positions(buf_ts, buf_tb, n_emitted, ts, tb, order):  # pragma: no cover - jit
    """Where arriving events go when merged into a sorted buffer.

    ``buf_ts``/``buf_tb`` are the buffer's keys (sorted), its first ``n_emitted`` events
    the emitted ones; ``ts``/``tb`` are the keys of the arrivals in arrival order, and
    ``order`` sorts them by key, stably (arrival order on equal keys). Returns, per
    arrival, its position in the merged buffer (behind buffered events with an equal key
    and behind earlier arrivals with an equal key: what inserting them one by one with
    ``bisect_right`` gives) and whether it lands in front of the last emitted event; then
    how many do, and whether all arrivals simply extend the buffer in arrival order.
    """
    n = ts.shape[0]
    nb = buf_ts.shape[0]
    pos = np.empty(n, np.int64)
    inside = np.zeros(n, np.bool_)
    n_inside = 0
    at_tail = True
    # binary search for the place of the smallest arrival, then walk along
    i = 0
    hi = nb
    if n:
        t, b = ts[order[0]], tb[order[0]]
        while i < hi:
            mid = (i + hi) // 2
            if _key_less(t, b, buf_ts[mid], buf_tb[mid]):
                hi = mid
            else:
                i = mid + 1
    for r in range(n):
        j = order[r]
        while i < nb and not _key_less(ts[j], tb[j], buf_ts[i], buf_tb[i]):
            i += 1
        pos[j] = i + r
        if i < n_emitted:
            inside[j] = True
            n_inside += 1
        if j != r or i < nb:
            at_tail = False
    return pos, inside, n_inside, at_tail


@njit(cache=True, nogil=True)
def max_seq_per_producer(tb, shift):  # pragma: no cover - jit
    """The largest counter per producer packed in the tie-breaks ``tb`` (``producer <<
    shift | seq``), external events (producer 0) left out. Returns the producers, in order
    of first appearance, and their largest counters. Events come in runs of one producer,
    so the producer of the previous event is tried first."""
    n = tb.shape[0]
    producers = np.empty(n, np.int64)
    largest = np.empty(n, np.int64)
    mask = (np.int64(1) << shift) - 1
    k = 0
    at = -1
    for j in range(n):
        p = tb[j] >> shift
        if p == 0:
            continue
        s = tb[j] & mask
        if at < 0 or producers[at] != p:
            at = -1
            for i in range(k):
                if producers[i] == p:
                    at = i
                    break
            if at < 0:
                at = k
                producers[k] = p
                largest[k] = s
                k += 1
        if s > largest[at]:
            largest[at] = s
    return producers[:k], largest[:k]


@njit(cache=True, nogil=True)
def _put_int(buf, at, value, size):  # pragma: no cover - jit
    """Write ``value`` as a little-endian integer of ``size`` bytes at ``buf[at]``."""
    at = np.uint64(at)  # unsigned: no check for negative indices, so the stores combine
    for i in range(size):
        buf[at + np.uint64(i)] = np.uint8((value >> (8 * i)) & 0xFF)


@njit(cache=True, nogil=True)
def stamp(out, layout, cause, in_origin, origin, kplus, producer, now, seq,
          number):  # pragma: no cover - jit
    """Stamp generated events (``out``, rows of a batch dtype as bytes) with what their
    causes give them, in one pass.

    ``layout`` holds the row width and the byte offsets of ``producer`` (int32), ``seq``,
    ``kplus``, ``origin`` and ``ats`` (int64). Row ``r`` was caused by input
    ``cause[r]``; it gets ``producer``, the input's K+ (``kplus[cause[r]]``; none given:
    left as it is), the largest origin of ``origin`` and the inputs up to its cause
    (``in_origin``; none given: ``origin``), arrival ``now`` and, if ``number``, the
    counter ``seq + r``. Returns the largest origin over ``origin`` and every input.
    """
    n_in = in_origin.shape[0]
    running = np.empty(n_in, np.int64)
    for i in range(n_in):
        if in_origin[i] > origin:
            origin = in_origin[i]
        running[i] = origin
    width = layout[0]
    for r in range(cause.shape[0]):
        c = cause[r]
        base = r * width
        _put_int(out, base + layout[1], producer, 4)
        if number:
            _put_int(out, base + layout[2], seq + r, 8)
        if kplus.shape[0] > 0:
            _put_int(out, base + layout[3], kplus[c], 8)
        _put_int(out, base + layout[4], running[c] if n_in else origin, 8)
        _put_int(out, base + layout[5], now, 8)
    return origin
