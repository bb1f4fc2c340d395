"""The README's example runs and prints what it says."""

import re
from pathlib import Path


def test_readme_example_runs(capsys):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "[(15, 7), (45, 9)]"
