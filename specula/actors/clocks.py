"""One clock for a run across hosts: every actor's time stamps on the driver's clock.

Detection latency is an emission time minus the origin the source stamped, and on a
cluster the two are read from different hosts' wall clocks, which differ by whatever
NTP left: milliseconds, more on a host that lost its time server. Before the stream
starts the driver estimates each actor's offset, its host's clock minus the driver's,
by Cristian's algorithm: ask for the remote time a few times and keep the answer of the
shortest round trip, taken to be read halfway through it, so the error is at most half
that round trip. The actor subtracts the offset from every time stamp it takes (its
emissions, arrivals and samples), so every latency compares one clock with itself, up
to the two error bounds. The report gives each instance's offset and bound. An actor on
the driver's own host reads the same clock: its offset is 0 with no error, and the
probes (a few round trips per process, ~25 ms of every run's start on one machine) are
not made (:func:`same_clock`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Round trips per estimate: the shortest of a few is near the network's minimum.
PROBES = 5


def estimate_offset(remote_now: Callable[[], int], probes: int = PROBES,
                    local_now: Callable[[], int] = time.time_ns) -> tuple[int, int]:
    """``(offset, error)`` in ns: the clock behind ``remote_now`` minus ``local_now``'s,
    and the bound of the estimate's error (half the shortest round trip).

    >>> ticks = iter(range(0, 100, 10))
    >>> estimate_offset(lambda: 1_000, probes=1, local_now=lambda: next(ticks))
    (995, 5)
    """
    best: tuple[int, int] | None = None
    for _ in range(probes):
        sent = local_now()
        remote = remote_now()
        rtt = local_now() - sent
        if best is None or rtt < best[1]:
            best = (remote - (sent + rtt // 2), rtt)
    assert best is not None, "at least one probe"
    return best[0], best[1] // 2


def same_clock(host: str, driver_host: str) -> tuple[int, int] | None:
    """``(0, 0)``, an offset of 0 with no error, if an actor on ``host`` reads the
    driver's clock (it runs on the driver's host, ``driver_host``: both as
    :func:`~.placement.this_host` names them); None if its offset is to be estimated.

    >>> same_clock("10.0.0.1 1a2b3c4d", "10.0.0.1 1a2b3c4d"), same_clock("a", "b")
    ((0, 0), None)
    """
    return (0, 0) if host == driver_host else None
