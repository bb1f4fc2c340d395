"""The files of a log on disk, and those of them that cannot be read whole.

Spark reads all files of a log in one job, and one file it cannot read (a truncated
``.gz``, a stray ``.csv`` among Parquet files, a file without read permission) fails the
job with a long Java traceback and nothing processed. :func:`log_files` lists the files
of a log as Spark would read them and looks at each one first. A file that cannot be
read whole becomes a :class:`Damage`: the file, how many complete lines of it can still
be read (a gzip stream decodes up to the damage), and why the rest cannot. Ingestion
reads those lines, quarantines the file as one record and reads the rest of the log.

Looking costs one decoding pass over every ``.gz`` file (zlib, on as many threads as
there are cores; about 10 s for the 4 GB of the full DEBS game on two cores), the
footer of every Parquet file and the first byte of every other file.
:class:`GzipReader` is the decoder behind the check; the NumPy reader of position files
reads ``.gz`` files through it too, so both paths keep the same lines of a damaged file.
"""

from __future__ import annotations

import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO

from specula.pipelines.logs import LogError

_GZIP_WBITS = 31  # zlib's window bits for a gzip header and trailer
_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class Damage:
    """A file of a log that cannot be read whole.

    ``lines`` complete lines of it can be read before the damage (0: none); the
    quarantine records it at line ``lines + 1``, the first line that is lost.
    """

    path: str
    lines: int
    reason: str

    @property
    def uri(self) -> str:
        """The file as Spark names it (``input_file_name()``), for the quarantine table
        (a path that is a URI already, ``hdfs://...``, as it is)."""
        from pathlib import Path

        return self.path if "://" in self.path else Path(self.path).resolve().as_uri()


@dataclass(frozen=True)
class LogFiles:
    """The files of a log: what they hold, the ones read whole, and the damaged ones."""

    table: bool  # Parquet files (else text lines)
    readable: tuple[str, ...]
    damaged: tuple[Damage, ...]


def log_files(log: str) -> LogFiles:
    """List and look at the files of ``log`` (a file, or a directory one level deep).

    A directory holds a table log when one of its files ends in ``.parquet``; then its
    other files are damage ("not a Parquet file"). Files whose names start with ``_`` or
    ``.`` are skipped, as Spark skips them (``_SUCCESS``, ``.crc``). Raises
    :class:`LogError` when ``log`` does not exist.
    """
    paths = _paths(log)
    table = any(p.endswith(".parquet") for p in paths)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        found = list(pool.map(_parquet_damage if table else _text_damage, paths))
    return LogFiles(table, tuple(p for p, d in zip(paths, found, strict=True) if d is None),
                    tuple(d for d in found if d is not None))


#: How many times its size on disk a file's rows take as text: a DEBS 2013 row is ~77
#: bytes of text, ~43 in Parquet, and gzip packs such text 2.6 to 1 (generated rows) or
#: more; 4 errs towards counting a ``.gz`` log large (C2 compiles it).
_TEXT_FACTOR = {".gz": 4.0, ".parquet": 1.8}


def log_text_bytes(log: str) -> int:
    """The bytes of text ``log``'s rows would take, estimated from its files' sizes
    (nothing is read): a measure of its rows that does not depend on how it is stored.
    Raises :class:`LogError` when ``log`` does not exist."""
    total = 0.0
    for path in _paths(log):
        if os.path.isfile(path):
            factor = next((f for end, f in _TEXT_FACTOR.items() if path.endswith(end)), 1.0)
            total += factor * os.path.getsize(path)
    return int(total)


def is_small_log(log: str) -> bool:
    """Does ``log`` take less text than :data:`~specula.cluster.spark.SMALL_INPUT_BYTES`
    (so that a Spark job reading it starts its JVMs with ``small_input``)?"""
    from specula.cluster.spark import SMALL_INPUT_BYTES

    return log_text_bytes(log) < SMALL_INPUT_BYTES


def _paths(log: str) -> list[str]:
    """The files of ``log`` as Spark reads them (see :func:`log_files`)."""
    if not os.path.exists(log):
        raise LogError(f"{log}: no such file or directory")
    if not os.path.isdir(log):
        return [log]
    names = sorted(n for n in os.listdir(log) if not n.startswith(("_", ".")))
    return [os.path.join(log, n) for n in names]


def file_damage(path: str) -> Damage | None:
    """What keeps ``path`` from being read whole as what its name says it is (a live
    watch reads each file so): a ``.parquet`` file's footer, any other file as text (a
    ``.gz`` file decoded to its end, the first byte of the others); None if nothing."""
    return (_parquet_damage if path.endswith(".parquet") else _text_damage)(path)


def _text_damage(path: str) -> Damage | None:
    if os.path.isdir(path):
        return Damage(path, 0, "a directory inside the log: only the files directly in "
                               "the log's directory are read")
    try:
        with open(path, "rb") as raw:
            if not path.endswith(".gz"):
                raw.read(1)
                return None
            return gzip_damage(path, raw)
    except OSError as exc:
        return Damage(path, 0, f"cannot be read ({exc.strerror or exc})")


def _parquet_damage(path: str) -> Damage | None:
    if not path.endswith(".parquet"):
        return Damage(path, 0, "not a Parquet file: in a directory of Parquet files only "
                               "the .parquet files are read")
    import pyarrow.parquet as pq

    try:
        pq.ParquetFile(path).close()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError and others
        return Damage(path, 0, f"not a readable Parquet file ({exc})")
    return None


def gzip_damage(path: str, raw: IO[bytes]) -> Damage | None:
    """Decode the gzip stream ``raw`` of ``path`` to its end; the damage found, if any.

    Counts the complete lines before the damage as Spark's text source splits them: at
    LF, CR LF and a lone CR.
    """
    reader = GzipReader(raw)
    lines, last = 0, b""
    while data := reader.read(_READ_BYTES):
        lines += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
        if last == b"\r" and data.startswith(b"\n"):
            lines -= 1
        last = data[-1:]
    if reader.damage is None:
        return None
    return Damage(path, lines, f"{reader.damage}; the {lines:,} complete lines before it "
                               "were read, the rest of the file is lost")


class GzipReader:
    """The decoded bytes of a gzip stream (of one or more members), up to any damage.

    ``gzip.GzipFile`` raises ``EOFError`` at a truncated end and loses what the failing
    read decoded. This reader returns every byte that decodes, then ends the stream
    and sets :attr:`damage` to what went wrong (None for an intact stream).
    """

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._decoder = zlib.decompressobj(_GZIP_WBITS)
        self._member_open = False  # compressed input fed, the member's end not seen
        self._decoded = bytearray()
        self._finished = False
        self.damage: str | None = None

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` decoded bytes (all that are left for ``size < 0``); b"" at the end."""
        while not self._finished and (size < 0 or len(self._decoded) < size):
            self._decode_more()
        size = len(self._decoded) if size < 0 else size
        out = bytes(self._decoded[:size])
        del self._decoded[:size]
        return out

    def _decode_more(self) -> None:
        data = self._decoder.unused_data if self._decoder.eof else b""
        if self._decoder.eof:  # one member ended; another may follow
            self._decoder = zlib.decompressobj(_GZIP_WBITS)
            self._member_open = False
        data = data or self._raw.read(_READ_BYTES)
        if not data:
            self._finished = True
            if self._member_open:
                self.damage = "truncated gzip file: the compressed data ends early"
            return
        if not self._member_open and not data.strip(b"\0"):  # padding after the last member
            return
        self._member_open = True
        try:
            self._decoded += self._decoder.decompress(data)
        except zlib.error as exc:
            self._finished = True
            self.damage = f"damaged gzip data ({exc})"
            return
        if self._decoder.eof:
            self._member_open = False
