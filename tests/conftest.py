import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

# The JVMs the tests start (Spark's driver and executors, in this process and in every
# `specula replay` subprocess, which inherit the environment, and the standalone
# master and worker) live for seconds, not hours: C1 alone compiles Spark's planner and
# generated code in a fraction of the time C2 takes to warm up on a small machine, and
# changes nothing they compute. Specula itself does so only for a small log
# (`SMALL_INPUT_BYTES`); a watched log, whose size it cannot know, gets C1 here too.
_QUICK_JIT = "-XX:TieredStopAtLevel=1"
if _QUICK_JIT not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = " ".join(
        filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), _QUICK_JIT]))
