"""`make test` runs the suite on two pytest-xdist workers and relies on `--dist loadgroup`
to keep the tests that start Ray or Spark on one of them (tests/conftest.py). Some
pytest and xdist versions together drop the groups without a word (pytest 9.2 with
xdist 3.8: pytest-dev/pytest-xdist#1386); this proves the installed pair keeps them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def test_loadgroup_keeps_a_group_on_one_worker(tmp_path: Path):
    (tmp_path / "test_grouped.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "@pytest.mark.xdist_group('cluster')\n"
        "def test_grouped(i):\n    pass\n\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_free(i):\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                           "-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                           "-c", "/dev/null", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    grouped = re.findall(r"\[(gw\d)\].*PASSED .*::test_grouped\[\d\]@cluster", done.stdout)
    assert len(grouped) == 6 and len(set(grouped)) == 1, done.stdout
