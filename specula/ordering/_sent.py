"""What a speculative unit with on-demand retraction has sent, and the revisions a replay
turns into messages.

An output's identity is its cause: the input event whose processing generated it (that
event's key) and its rank among that event's outputs. On the wire it is named by a
*label*, the ``seq`` field: labels increase in the unit's output order, as positional
counters do, but appended outputs leave a gap of :data:`GAP` labels between them, so an
output that a replay inserts in front of others takes a free label in the gap instead
of renumbering everything behind it. An insertion therefore changes no identity, the
snapshots behind it still hold the labels they held, and a replay stops at the first
snapshot whose detector state equals the recorded one.

The log keeps the last version sent under every label a replay can still reach (from
the oldest snapshot's bound on) with its cause. After a replay, :meth:`SentLog.revise`
pairs the regenerated outputs with the logged ones of the replayed region by cause and
sends, for each:

* nothing when the paired versions are equal;
* an ``UPDATE`` when type and key are unchanged: it routes exactly where the old version
  went, and the consumer replaces it;
* a ``REVOKE`` of the old version, then the new one as a plain event under the same label,
  when type or key changed (the revocation routes like the old version);
* a plain event under a free label between its neighbours for an output nothing was sent
  for; and a ``REVOKE`` (or, for the tail of the log, one ``RETRACTION``) for an old
  output that was not generated again.

These are the *on-demand* messages. The same replay under full retraction would send one
``RETRACTION`` from the replay's first label and then every output from there on; when
that is not more messages, or when a gap has no free label left, the log sends exactly
that instead, with fresh labels, and the unit renames its snapshots' bounds to match
(:class:`Revision`). So a replay never sends more messages than full retraction would.

Labels are spaced below 2**39 and dense above it (then on-demand replays fall back to the
full messages); a label must stay below 2**40, the field width of the ordering key's
tie-break.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specula import events as ev
from specula.ordering._records import is_set, tiebreak

#: Labels between two appended outputs: room for insertions in front of the second.
GAP = 256
#: From this label on outputs are numbered densely (the label space is running out).
DENSE_FROM = 1 << 39
#: The first label that no longer fits the ordering key's tie-break.
LIMIT = 1 << 40
#: A cause that is no input event: the detector's end-of-stream output.
NO_CAUSE = np.iinfo(np.int64).max
#: An output's cause: the key ``(ts, tie-break)`` of its input event and its rank ``j``
#: among that event's outputs.
CAUSE_DTYPE = np.dtype([("ts", np.int64), ("tb", np.int64), ("j", np.int64)])
#: Fields that tell two versions of an event apart (as ``same_event``, without the label).
_ARRIVAL = ("seq", "flags", "ats", "kplus", "origin")
_NO_LABELS = np.empty(0, np.int64)


def appended(lo: int, n: int) -> np.ndarray:
    """Labels for ``n`` outputs appended behind every label below ``lo``: on the next
    multiples of :data:`GAP` above ``lo``, so that free labels lie in front of each
    (densely from :data:`DENSE_FROM` on)."""
    if lo >= DENSE_FROM:
        out = lo + np.arange(n, dtype=np.int64)
    else:
        out = (lo // GAP + 1) * GAP + GAP * np.arange(n, dtype=np.int64)
    if n and out[-1] >= LIMIT:
        raise OverflowError(f"output label {int(out[-1])} does not fit the ordering key "
                            f"(labels must stay below 2**40)")
    return out


def causes(events: np.ndarray | None, cause: np.ndarray, time: int | None = None
           ) -> np.ndarray:
    """The causes of outputs sorted by ``cause``, their input's index in ``events``
    (None: the end of the stream, or with ``time`` the passing of event time to it,
    which comes behind every input of that time stamp)."""
    out = np.empty(len(cause), CAUSE_DTYPE)
    if events is None:
        out["ts"] = NO_CAUSE if time is None else time
        out["tb"] = NO_CAUSE
    else:
        rows = events[cause]
        out["ts"], out["tb"] = rows["ts"], tiebreak(rows["producer"], rows["seq"])
    out["j"] = 0 if len(cause) == 1 else (
        np.arange(len(cause)) - np.searchsorted(cause, cause, "left"))
    return out


@dataclass
class Revision:
    """What :meth:`SentLog.revise` decided for one replay.

    ``messages`` go out in order. ``labels`` are the final labels of the regenerated
    outputs, in order. ``full``: the full-retraction messages were chosen, and the outputs
    behind the replayed region were renamed too (``after_old`` to ``after_new``).
    ``updates``, ``revocations``, ``retractions`` count the messages by kind (the rest
    are plain events) and ``retracted`` the live events the retraction removed.
    """

    messages: np.ndarray
    labels: np.ndarray
    lo: int
    full: bool = False
    after_old: np.ndarray = field(default_factory=lambda: _NO_LABELS)
    after_new: np.ndarray = field(default_factory=lambda: _NO_LABELS)
    updates: int = 0
    revocations: int = 0
    retractions: int = 0
    retracted: int = 0

    @property
    def events(self) -> int:
        """Plain events and updates sent."""
        return len(self.messages) - self.revocations - self.retractions

    @property
    def retracted_from(self) -> int:
        """The label the retraction sent retracts from (-1: none sent)."""
        hit = np.flatnonzero(self.messages["flags"] & ev.RETRACTION)
        return int(self.messages["seq"][hit[0]]) if len(hit) else -1

    def count(self, stats: Any) -> None:
        """Add the messages to a unit's counters (a ``UnitStats``)."""
        stats.generated += self.events
        stats.updates_sent += self.updates
        stats.revocations_sent += self.revocations
        stats.retractions_sent += self.retractions
        stats.events_retracted += self.retracted

    def top(self) -> int:
        """The bound behind the regenerated outputs: one above the last of their labels
        (the replay's bound if there are none)."""
        return int(self.labels[-1]) + 1 if len(self.labels) else self.lo

    def bound(self, old: int) -> int:
        """The bound of a snapshot behind the replayed region whose bound was ``old``:
        one above the new label of the last output in front of it (with the full
        messages, which rename those outputs)."""
        k = int(np.searchsorted(self.after_old, old, "left"))
        return int(self.after_new[k - 1]) + 1 if k else self.top()

    def next_seq(self, before: int, stopped: bool) -> int:
        """The unit's bound for its next appended output, which was ``before`` the replay
        (``stopped``: the replay stopped early)."""
        if self.full:
            return int(self.after_new[-1]) + 1 if len(self.after_new) else self.top()
        return max(before, self.top()) if stopped else self.top()

    def rename(self, snaps: np.ndarray, pos: int, stop: int, end: int) -> dict[int, Any]:
        """Give the snapshots at buffer positions ``[pos, end)`` (``snaps``: one per
        position, None for none; NamedTuples with the bound in ``seq``) the bounds of the
        labels settled on: those the replay took in ``[pos, stop)`` counted its outputs
        from the restored bound; behind ``stop``, the replay's last label may have moved
        past a recorded bound, or the full messages renamed everything. Returns the
        renamed snapshots by the id of the old object (the one in front of ``stop`` if
        an object stood on both sides, as a shared one may)."""
        behind: dict[int, Any] = {}
        ahead: dict[int, Any] = {}

        def rename(i: int, bound: int, done: dict[int, Any]) -> None:
            old = snaps[i]
            if id(old) not in done:
                done[id(old)] = old._replace(seq=bound)
            snaps[i] = done[id(old)]

        for i in (np.flatnonzero(is_set(snaps[pos:stop])) + pos).tolist():
            made = snaps[i].seq - self.lo  # outputs the replay made in front
            rename(i, int(self.labels[made - 1]) + 1 if made else self.lo, ahead)
        if self.full:
            for i in (np.flatnonzero(is_set(snaps[stop:end])) + stop).tolist():
                rename(i, self.bound(snaps[i].seq), behind)
        else:
            top = self.top()
            for i in range(stop, end):
                if snaps[i] is not None:
                    if snaps[i].seq >= top:
                        break  # bounds only grow along the buffer
                    rename(i, top, behind)
        return {**behind, **ahead}


class SentLog:
    """The last version sent under each label a replay can still reach, with its cause,
    in label order; and the outputs of the replay in progress.

    The log lives in arrays with room behind it (``_rows``, ``_why`` and ``_labels`` are
    views of positions ``[lo, lo + n)``): a replay's revision, which lands near the end,
    moves only what is behind it, and trimming moves the start.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.load(np.empty(0, dtype), np.empty(0, CAUSE_DTYPE))

    def __len__(self) -> int:
        return self._n

    @property
    def labels(self) -> np.ndarray:
        return self._labels

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """The versions and their causes (for checkpoints)."""
        return self._rows.copy(), self._why.copy()

    def load(self, rows: np.ndarray, why: np.ndarray, room: int = 0) -> None:
        """Hold these versions and causes (from :meth:`state`), with room for ``room``
        more behind them."""
        cap = max(len(rows) + room, 64)
        self._store: tuple[np.ndarray, np.ndarray, np.ndarray] = (
            np.zeros(cap, rows.dtype), np.zeros(cap, CAUSE_DTYPE), np.zeros(cap, np.int64))
        self._store[0][:len(rows)] = rows
        self._store[1][:len(rows)] = why
        self._store[2][:len(rows)] = rows["seq"]
        self._lo, self._n = 0, len(rows)
        self._views()

    def _views(self) -> None:
        lo, hi = self._lo, self._lo + self._n
        self._rows, self._why, self._labels = (a[lo:hi] for a in self._store)

    def record(self, out: np.ndarray, why: np.ndarray) -> None:
        """Log appended outputs (labels above every logged one) and their causes."""
        self._splice(self._n, self._n, out, why)

    def trim(self, bound: int) -> None:
        """Forget labels below ``bound``: no replay reaches them any more."""
        k = int(np.searchsorted(self._labels, bound, "left"))
        if k:
            self._lo += k
            self._n -= k
            self._views()

    # ------------------------------------------------------------ replays
    def take(self, out: np.ndarray, why: np.ndarray, bound: int, replay: bool) -> int:
        """Number new outputs (causes ``why``) from the unit's ``bound`` and return the
        next bound: appended ones under spaced labels, logged; a replay's counted
        provisionally from the restored bound and held until :meth:`revise`."""
        if replay:
            out["seq"] = bound + np.arange(len(out))
            self._pending.append((out, why))
            return bound + len(out)
        out["seq"] = labels = appended(bound, len(out))
        self.record(out, why)
        return int(labels[-1]) + 1 if len(out) else bound

    def revise(self, lo: int, hi: int | None, now: int) -> Revision:
        """Turn the outputs of the replay that restored a snapshot with bound ``lo`` into
        messages, and log them. ``hi``: the bound of the snapshot where the replay
        stopped (None: it replayed to the end); the logged labels in ``[lo, hi)`` are
        the replayed region's, those from ``hi`` on stay as they are (unless the full
        messages are chosen)."""
        new, why = self._take_pending()
        labels = self._labels
        i0 = int(np.searchsorted(labels, lo, "left"))
        i1 = len(labels) if hi is None else int(np.searchsorted(labels, hi, "left"))
        n_after = len(labels) - i1
        upper = int(labels[i1]) if n_after else None
        if i0 == i1:  # nothing was sent from the region: its outputs are all new
            final = _spread(lo, upper, len(new))
            if final is not None:
                new = new.copy()
                new["seq"] = final
                self._splice(i0, i1, new, why)
                return Revision(new, final, lo)
            return self._full(new, why, lo, i0, i1, now)
        old, old_why = self._rows[i0:i1], self._why[i0:i1]
        pair = _pair(why, old_why)
        final = _allocate(pair, old["seq"], lo, upper)
        cost_full = (1 if len(labels) > i0 else 0) + len(new) + n_after
        if final is not None:
            rev, labelled = self._on_demand(new, old, pair, final, lo, i1, now)
            if len(rev.messages) <= cost_full:
                self._splice(i0, i1, labelled, why)
                return rev
        return self._full(new, why, lo, i0, i1, now)

    def _take_pending(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._pending:
            return np.empty(0, self._rows.dtype), np.empty(0, CAUSE_DTYPE)
        if len(self._pending) == 1:
            (out, why), self._pending = self._pending[0], []
            return out, why
        outs, whys = zip(*self._pending, strict=True)
        self._pending = []
        return ev.concat_records(list(outs)), np.concatenate(whys)

    def _on_demand(self, new: np.ndarray, old: np.ndarray, pair: np.ndarray,
                   final: np.ndarray, lo: int, i1: int,
                   now: int) -> tuple[Revision, np.ndarray]:
        """The on-demand messages: revocations (and a retraction of the log's tail)
        first, then updates, then plain events in output order; with the regenerated
        outputs under their labels (to log if these messages are sent)."""
        new = new.copy()
        new["seq"] = final
        paired = np.flatnonzero(pair >= 0)
        plain = np.ones(len(new), bool)
        gone = np.ones(len(old), bool)
        revoke, upd = old[:0], new[:0]
        if len(paired):
            held = old[pair[paired]]
            moved = (held["type"] != new["type"][paired]) | (held["key"] != new["key"][paired])
            changed = ~_equal(held, new[paired])
            upd = new[paired[~moved & changed]]  # a moved one differs in type or key
            upd["flags"] = ev.UPDATE
            plain[paired[~moved]] = False
            gone[pair[paired]] = False
            revoke = held[moved]
        gone_at = np.flatnonzero(gone)
        # an unpaired tail of the whole log goes with one retraction
        n_tail = 0
        if len(gone_at) and i1 == len(self._rows):
            n_tail = len(gone_at) - int(np.searchsorted(
                gone_at, pair[paired[-1]] if len(paired) else -1, "right"))
        if len(gone_at) > n_tail:
            revoke = ev.concat_records([old[gone_at[:len(gone_at) - n_tail]], revoke])
        parts = []
        if len(revoke):
            revoke = revoke[np.argsort(revoke["seq"], kind="stable")]
            revoke["flags"], revoke["ats"] = ev.REVOKE, now
            parts.append(revoke)
        if n_tail:
            parts.append(_retraction(old[gone_at[len(gone_at) - n_tail]], now))
        if len(upd):
            parts.append(upd)
        if plain.any():
            parts.append(new if plain.all() else new[plain])
        messages = (parts[0] if len(parts) == 1 else ev.concat_records(parts) if parts
                    else new[:0])
        return Revision(messages, final, lo, updates=len(upd), revocations=len(revoke),
                        retractions=1 if n_tail else 0, retracted=n_tail), new

    def _full(self, new: np.ndarray, why: np.ndarray, lo: int, i0: int, i1: int,
              now: int) -> Revision:
        """The full-retraction messages: retract everything from ``lo`` on and send the
        regenerated outputs and those behind the region again, under fresh labels."""
        after, after_why = self._rows[i1:], self._why[i1:]
        resent = ev.concat_records([new, after])
        resent["seq"] = appended(lo, len(resent))
        resent["flags"], resent["ats"] = 0, now
        n_live = len(self._rows) - i0
        parts = [_retraction(self._rows[i0], now)] if n_live else []
        messages = ev.concat_records([*parts, resent])
        after_old = after["seq"].copy()
        self._splice(i0, len(self._rows), resent, np.concatenate([why, after_why]))
        return Revision(messages, resent["seq"][:len(new)].copy(), lo, full=True,
                        after_old=after_old, after_new=resent["seq"][len(new):].copy(),
                        retractions=len(parts), retracted=n_live)

    def _splice(self, i0: int, i1: int, rows: np.ndarray, why: np.ndarray) -> None:
        """Put ``rows`` (sorted labels that fit between the neighbours) in place of the
        logged rows ``[i0, i1)``; only the rows behind ``i1`` move."""
        grow = len(rows) - (i1 - i0)
        if self._lo + self._n + grow > len(self._store[0]):
            self.load(self._rows, self._why, room=self._n + grow + 64)
        lo, n = self._lo, self._n
        if grow:
            for a in self._store:
                a[lo + i1 + grow:lo + n + grow] = a[lo + i1:lo + n].copy()
        rows_store, why_store, labels_store = self._store
        rows_store[lo + i0:lo + i0 + len(rows)] = rows
        rows_store["flags"][lo + i0:lo + i0 + len(rows)] = 0
        why_store[lo + i0:lo + i0 + len(rows)] = why
        labels_store[lo + i0:lo + i0 + len(rows)] = rows["seq"]
        self._n = n + grow
        self._views()


def _retraction(first: np.void, now: int) -> np.ndarray:
    msg = np.zeros(1, first.dtype)
    msg["producer"], msg["seq"] = first["producer"], first["seq"]
    msg["flags"], msg["ats"] = ev.RETRACTION, now
    return msg


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: are the two versions equal (every field but label, flags and arrival)?"""
    same = np.ones(len(a), bool)
    for name in a.dtype.names or ():
        if name not in _ARRIVAL:
            same &= a[name] == b[name]
    return same


def _pair(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """For each regenerated output (causes ``new``, in output order), the index of the
    logged output with the same cause (``old``, in label order) or -1; pairs increase in
    both orders (a pair that would cross an earlier one is dropped)."""
    pair = np.full(len(new), -1, np.int64)
    if not len(new) or not len(old):
        return pair
    order = np.argsort(old, kind="stable")
    ranked = old[order]
    at = np.minimum(np.searchsorted(ranked, new, "left"), len(old) - 1)
    hit = ranked[at] == new
    dup = len(ranked) > 1 and bool((ranked[1:] == ranked[:-1]).any())
    if dup:  # a cause named twice (equal raw keys): pair in order, one by one
        return _pair_slowly(new, old)
    pair[hit] = order[at[hit]]
    found = np.flatnonzero(hit)
    k = pair[found]
    before = np.maximum.accumulate(np.concatenate([[-1], k[:-1]]))
    pair[found[k <= before]] = -1
    return pair


def _pair_slowly(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    waiting: dict[tuple[int, int, int], list[int]] = {}
    for k, c in enumerate(old.tolist()):
        waiting.setdefault(c, []).append(k)
    pair = np.full(len(new), -1, np.int64)
    last = -1
    for i, c in enumerate(new.tolist()):
        queue = waiting.get(c, [])
        while queue and queue[0] <= last:
            queue.pop(0)
        if queue:
            last = pair[i] = queue.pop(0)
    return pair


def _allocate(pair: np.ndarray, old_labels: np.ndarray, lo: int,
              upper: int | None) -> np.ndarray | None:
    """Labels for the regenerated outputs: a paired one keeps its old label, each run of
    unpaired ones is spread over the free labels between its neighbours (the next paired
    label, or ``upper`` behind the last pair: the first label behind the region, None
    for none). None when a gap has too few free labels."""
    final = np.empty(len(pair), np.int64)
    paired = np.flatnonzero(pair >= 0)
    final[paired] = old_labels[pair[paired]]
    bounds = [*paired.tolist(), len(pair)]
    start = 0
    for b in bounds:
        if b > start:  # unpaired outputs [start, b)
            low = int(final[start - 1]) + 1 if start else lo
            high = int(final[b]) if b < len(pair) else upper
            run = _spread(low, high, b - start)
            if run is None:
                return None
            final[start:b] = run
        start = b + 1
    return final


def _spread(low: int, high: int | None, r: int) -> np.ndarray | None:
    """``r`` increasing labels in ``[low, high)``, evenly spaced (appended if no
    ``high``), or None if there are fewer than ``r``."""
    if high is None:
        return appended(low, r)
    room = high - low
    if room < r:
        return None
    step = room // (r + 1)
    if step == 0:
        return low + np.arange(r, dtype=np.int64)
    return low - 1 + step * np.arange(1, r + 1, dtype=np.int64)
