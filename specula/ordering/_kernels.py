"""Numba kernels of the ordering unit: arrays and scalars in, arrays and scalars out.

They are private; :mod:`specula.ordering.unit` validates inputs and wraps them.

Time stamps are int64. ``NO_CLOCK`` marks "no clock event seen yet" and ``NO_DELAY``
marks "no delay measured since the last clock update"; both sit far enough from the
int64 limits that the sums below cannot overflow.
"""

from __future__ import annotations

import numpy as np
from numba import njit

NO_CLOCK = np.int64(-(2**62))
NO_DELAY = np.int64(-(2**62))


@njit(cache=True, nogil=True)
def advance_clock(ts, kplus, is_clock, is_data, clk, k, pending):  # pragma: no cover - jit
    """Clock extraction and dynamic K for a batch of arrivals, in arrival order.

    For every arriving event ``j`` this returns the local clock and K *after* its arrival.
    ``pending`` is ``max(kplus - ts)`` over the data events received since the last
    clock update. On a clock event the clock becomes ``max(clk, ts)`` (a clock event that
    arrives out of order never moves the clock back) and K grows to the largest delay of
    those events measured against the *new* clock, ``clk + pending`` (paper sec. 3.2: the
    delay of an event is known only at the next clock update; Fig. 4 sets K = 3 for C1 at
    A4, not K = 1 at its arrival). Control messages (``is_data`` false) carry no delay.
    """
    n = ts.shape[0]
    clk_out = np.empty(n, np.int64)
    k_out = np.empty(n, np.int64)
    for j in range(n):
        if is_data[j]:
            d = kplus[j] - ts[j]
            if d > pending:
                pending = d
            if is_clock[j]:
                if ts[j] > clk:
                    clk = ts[j]
                if pending != NO_DELAY and clk + pending > k:
                    k = clk + pending
                pending = NO_DELAY
        clk_out[j] = clk
        k_out[j] = k
    return clk_out, k_out, clk, k, pending


@njit(cache=True, nogil=True)
def _key_less(ts_a, tb_a, ts_b, tb_b):  # pragma: no cover - jit
    return ts_a < ts_b or (ts_a == ts_b and tb_a < tb_b)


@njit(cache=True, nogil=True)
def kslack_order(buf_ts, buf_tb, ts, producer, seq, kplus, types, clock_table, clk, k,
                 pending, h_ts, h_tb, process_late, first_ix, shift):  # pragma: no cover - jit
    """Pure K-slack (alpha = 1) over a run of data events, event by event in arrival order.

    ``buf_ts``/``buf_tb`` is the sorted buffer (time stamp, tie-break); its events have
    store indices ``0..len-1`` and the arriving ones ``first_ix + j``. Per arrival: the
    clock and K advance as in :func:`advance_clock` (``clock_table[type]`` marks clock
    types); the event is late if its key is below the horizon ``(h_ts, h_tb)`` (the key
    of the last emitted event), else insertion-sorted from the tail; then every head
    event with ``ts + K <= clk`` is emitted and purged.

    Returns ``(emitted, n_emitted, late, n_late, remaining_ix, remaining_ts,
    remaining_tb, clk, k, pending, h_ts, h_tb)``; ``emitted[:n_emitted]`` are store
    indices in emission order (late events processed out of order included, when
    ``process_late``) and ``late[:n_late]`` the late ones.
    """
    nb = buf_ts.shape[0]
    n = ts.shape[0]
    cap = nb + n
    q_ts = np.empty(cap, np.int64)
    q_tb = np.empty(cap, np.int64)
    q_ix = np.empty(cap, np.int64)
    for i in range(nb):
        q_ts[i] = buf_ts[i]
        q_tb[i] = buf_tb[i]
        q_ix[i] = i
    head = 0
    tail = nb
    emitted = np.empty(cap, np.int64)
    ne = 0
    late = np.empty(n, np.int64)
    nl = 0
    for j in range(n):
        t = ts[j]
        b = (np.int64(producer[j]) << shift) | seq[j]
        d = kplus[j] - t
        if d > pending:
            pending = d
        if clock_table[types[j]]:
            if t > clk:
                clk = t
            if pending != NO_DELAY and clk + pending > k:
                k = clk + pending
            pending = NO_DELAY
        if _key_less(t, b, h_ts, h_tb):
            late[nl] = first_ix + j
            nl += 1
            if process_late:
                emitted[ne] = first_ix + j
                ne += 1
        else:
            i = tail
            while i > head and _key_less(t, b, q_ts[i - 1], q_tb[i - 1]):
                q_ts[i] = q_ts[i - 1]
                q_tb[i] = q_tb[i - 1]
                q_ix[i] = q_ix[i - 1]
                i -= 1
            q_ts[i] = t
            q_tb[i] = b
            q_ix[i] = first_ix + j
            tail += 1
        while head < tail and q_ts[head] + k <= clk:
            emitted[ne] = q_ix[head]
            ne += 1
            h_ts = q_ts[head]
            h_tb = q_tb[head]
            head += 1
    return (emitted, ne, late, nl, q_ix[head:tail].copy(), q_ts[head:tail].copy(),
            q_tb[head:tail].copy(), clk, k, pending, h_ts, h_tb)
