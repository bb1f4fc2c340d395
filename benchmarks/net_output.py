"""What a retraction costs a sink's net output, by the number of live events.

    python benchmarks/net_output.py --quick

A producer with ``n`` live events (1k, 10k, 100k, 1M) retracts its newest 10, 20 times;
the median time per retraction is measured with ``NetOutput`` and, side by side, with
the scan of every live counter it replaced (``ScanNetOutput`` below, kept here as the
baseline). The last line printed is one JSON object: ``retraction_us_at_<n>_live`` and
``scan_us_at_<n>_live`` per size, and ``speedup_at_1m_live``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from specula import events as ev
from specula.detectors.examples import example_registry
from specula.ordering import NetOutput

DTYPE = example_registry().dtype(["G"])


class ScanNetOutput(NetOutput):
    """The baseline: a retraction looks at every live counter of its producer."""

    def _retract(self, p, live, s):
        for gone in [x for x in live if x >= s]:
            del live[gone]


def retraction_us(cls: type[NetOutput], live: int, repeat: int) -> float:
    net = cls(DTYPE)
    rows = np.zeros(live, DTYPE)
    rows["producer"], rows["seq"] = 1, np.arange(live)
    net.apply(rows, 0)
    times = []
    for i in range(repeat):
        msg = np.zeros(1, DTYPE)
        msg["producer"], msg["seq"], msg["flags"] = 1, live - 10 * (i + 1), ev.RETRACTION
        t0 = time.perf_counter()
        net.apply(msg, 1)
        times.append(time.perf_counter() - t0)
    assert len(net) == live - 10 * repeat
    return statistics.median(times) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats")
    args = p.parse_args()
    repeat = 10 if args.quick else 20
    out: dict[str, float] = {}
    for n, label in ((1_000, "1k"), (10_000, "10k"), (100_000, "100k"), (1_000_000, "1m")):
        indexed = retraction_us(NetOutput, n, repeat)
        scan = retraction_us(ScanNetOutput, n, repeat)
        print(f"{n:>9,} live: retraction {indexed:8.1f} us   scan of every live event "
              f"{scan:10.1f} us")
        out[f"retraction_us_at_{label}_live"] = round(indexed, 1)
        out[f"scan_us_at_{label}_live"] = round(scan, 1)
    out["speedup_at_1m_live"] = round(out["scan_us_at_1m_live"] /
                                      out["retraction_us_at_1m_live"], 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
