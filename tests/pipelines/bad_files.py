"""Files a watched directory must survive, written into a test's staging folder: a
``.csv.gz`` cut in half, binary noise with no line break, and a Parquet table of other
columns (``tests/pipelines/test_watch_files.py``, ``test_watch_bad_files.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from specula.pipelines.log_files import gzip_damage
from specula.soccer.debs2013 import write_positions


def write_cut_gz(path: Path, rows: np.ndarray) -> int:
    """``rows`` as a ``.csv.gz`` cut in half; the number of whole lines before the
    damage (more than none, fewer than ``rows``)."""
    write_positions(path, rows, newline="\n")
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) // 2])
    with open(path, "rb") as cut:
        damage = gzip_damage(str(path), cut)
    assert damage is not None and 0 < damage.lines < len(rows)
    return damage.lines


def write_noise(path: Path, size: int, seed: int) -> None:
    """``size`` random bytes with no line break: one line of binary garbage."""
    noise = np.random.default_rng(seed).integers(0, 256, size, np.uint8)
    noise[(noise == ord("\n")) | (noise == ord("\r"))] = ord("x")
    path.write_bytes(noise.tobytes())


def write_other_parquet(path: Path) -> None:
    """A Parquet table that is no position log: other columns."""
    pq.write_table(pa.table({"sid": [1], "when": [2]}), path)
