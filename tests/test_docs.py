"""The guides in docs/ work as printed: their Python blocks run, in order, as one script."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_writing_a_detector_runs_as_printed(capsys):
    text = (DOCS / "writing-a-detector.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 5
    namespace: dict = {"__name__": "writing_a_detector"}
    exec(compile("\n".join(blocks), "docs/writing-a-detector.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert re.match(r"[1-9]\d* long stoppages: precision 1\.00, recall 1\.00", printed)
