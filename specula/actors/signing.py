"""Signed checkpoint storage: what an actor reads back is what a Specula run wrote.

A checkpoint holds the detector's state as :meth:`~specula.detectors.base.Detector.snapshot`
returns it, which by default (and for most detectors) is a pickle, and unpickling runs
whatever code the pickle names. So every object an actor stores (:class:`~.recovery.Store`:
checkpoints, output segments, the incarnation) is signed with HMAC-SHA256 under the
run's key, and a read checks the signature before it returns a byte: a file altered, or
written by anyone without the key, is refused (:class:`UntrustedCheckpointError`, naming the
file) before anything parses it. Pickling stays, so user detectors keep their default
snapshot; a checkpoint is tied to the Python and library versions that wrote it.

The key. Each user has one secret, :func:`key_file`: ``$SPECULA_KEY_FILE``, else
``$XDG_CONFIG_HOME/specula/checkpoint.key`` (``~/.config/...``), created on first use
(32 random bytes, hex, mode 0600) and refused if others may read or write it; it lives
outside every run folder, so write access to a run folder does not give the key. A run's
key is derived from it and the run's folder name (:func:`run_key`); the driver derives
it and hands it to the actors with :class:`~.recovery.Checkpoints`, so actors on other
hosts never read the file. A resume derives the same key from the same file and the run
named in ``suspended.json``: resuming a run folder on another machine or as another
user needs a copy of the key file (``SPECULA_KEY_FILE``). A run whose checkpoints live
in a temporary folder (nothing resumes it) signs with a random key instead.

The signed message is the object's name within the checkpoint storage (run folder,
actor, object) and its bytes, so an object moved to another actor or run is refused too.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

#: Environment variable naming the key file (default: under the user's config folder).
KEY_ENV = "SPECULA_KEY_FILE"

#: What a signed object starts with, before its 32-byte tag.
MAGIC = b"specula-hmac-sha256\n"

_KEY_BYTES = 32
_TAG_BYTES = hashlib.sha256().digest_size


class UntrustedCheckpointError(ValueError):
    """A stored object whose signature does not check: refused before it is parsed."""


def key_file() -> Path:
    """Where the user's checkpoint key lives (see the module)."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV]).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config) / "specula" / "checkpoint.key"


def user_key() -> bytes:
    """The user's secret (:func:`key_file`), created on first use; a file others may
    read or write, or one that does not hold a key, is refused (``UntrustedCheckpointError``)."""
    path = key_file()
    if not path.exists():
        _create(path)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise UntrustedCheckpointError(f"{path}: the checkpoint key may be read or written by "
                                  f"others (mode {mode:o}); make it private "
                                  f"(chmod 600 {path})")
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        key = b""
    if len(key) < _KEY_BYTES:
        raise UntrustedCheckpointError(f"{path}: not a checkpoint key ({_KEY_BYTES} bytes or "
                                  "more, in hex); remove it to have a new one made")
    return key


def _create(path: Path) -> None:
    """Write a new random key to ``path`` (mode 0600), unless another process did first."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(_KEY_BYTES) + "\n")
        with contextlib.suppress(FileExistsError):  # another process made one meanwhile
            os.link(tmp, path)
    finally:
        tmp.unlink()


def run_key(run: str) -> bytes:
    """The key of the run whose checkpoints are in folder ``run``, derived from the
    user's (:func:`user_key`)."""
    return hmac.digest(user_key(), b"specula checkpoints\0" + run.encode(), "sha256")


def random_key() -> bytes:
    """A key for a run nothing will resume (its checkpoints are temporary)."""
    return secrets.token_bytes(_KEY_BYTES)


def signed_head(key: bytes, name: str, *parts: bytes | memoryview) -> bytes:
    """What an object stored as ``name`` starts with, before its bytes ``parts`` (in
    order): the signature of their concatenation, computed part by part, so that an
    object written in several parts is never joined into one buffer first."""
    return MAGIC + _tag(key, name, *parts)


def verify(key: bytes, name: str, signed: bytes, where: str) -> bytes:
    """The data after :func:`signed_head` in ``signed``, if its head is the one made for
    that data as ``name`` under ``key``; else ``UntrustedCheckpointError`` naming the
    file ``where``."""
    head = len(MAGIC) + _TAG_BYTES
    if not signed.startswith(MAGIC) or len(signed) < head:
        raise UntrustedCheckpointError(
            f"{where}: not signed (written by a Specula older than signed checkpoints, "
            "or not by Specula); refusing to read it: remove the run's state to start "
            "afresh")
    data = signed[head:]
    if not hmac.compare_digest(signed[len(MAGIC):head], _tag(key, name, data)):
        raise UntrustedCheckpointError(
            f"{where}: its signature does not match this run's key: the file was altered, "
            f"moved from another run or actor, or written under another key than the "
            f"one this run uses (${KEY_ENV}, else ~/.config/specula/checkpoint.key); "
            "refusing to read it")
    return data


def _tag(key: bytes, name: str, *parts: bytes | memoryview) -> bytes:
    mac = hmac.new(key, name.encode() + b"\0", "sha256")
    for part in parts:
        mac.update(part)
    return mac.digest()
