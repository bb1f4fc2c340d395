"""docs/soccer.md lists the soccer types, their fields and the truth's records as the
code has them: its generated blocks are what the catalogue makes now (a golden file),
and the catalogue explains every type, field and truth field it finds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specula.soccer import catalogue as cat
from specula.soccer.types import soccer_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "soccer.md"
REGENERATE = "python -m specula.soccer.catalogue --write docs/soccer.md"


def test_the_doc_lists_the_types_as_the_registry_has_them():
    text = DOC.read_text()
    assert cat.update(text) == text, (
        f"docs/soccer.md and the soccer registry, graph or truth disagree: run `{REGENERATE}` "
        "(and give a new type, field or truth field its meaning in "
        "specula/soccer/catalogue.py first)")


def test_every_type_and_field_appears_with_its_dtype():
    events = cat.catalogue()["events"]
    for etype in soccer_registry().types():
        assert f"| `{etype.name}` |" in events
        for field, dtype in etype.fields:
            assert f"| `{field}` | {dtype.name} |" in events


def test_a_type_without_a_meaning_is_refused(monkeypatch):
    monkeypatch.delitem(cat.TYPES, "shot")
    with pytest.raises(KeyError, match="shot"):
        cat.catalogue()


def test_a_truth_field_without_a_meaning_is_refused(monkeypatch):
    dtype, row, meanings = cat.TRUTH["kicks"]
    wider = np.dtype([*dtype.descr, ("speed", "f8")])
    monkeypatch.setitem(cat.TRUTH, "kicks", (wider, row, meanings))
    with pytest.raises(KeyError, match="speed"):
        cat.catalogue()


def test_update_replaces_only_between_the_markers_and_needs_them():
    begin, end = (m.format(name="events") for m in cat.MARKERS)
    doc = f"before\n{begin}\nold\n{end}\nafter\n"
    assert cat.update(doc, {"events": "new\n"}) == f"before\n{begin}\nnew\n{end}\nafter\n"
    with pytest.raises(ValueError, match="markers of block 'truth'"):
        cat.update(doc, {"truth": "x\n"})


def test_the_command_writes_the_doc(tmp_path, capsys):
    begin, end = (m.format(name="truth") for m in cat.MARKERS)
    doc = tmp_path / "soccer.md"
    doc.write_text(f"{begin}\n{end}\n" + "".join(
        f"{b}\n{e}\n" for b, e in [(m.format(name="events") for m in cat.MARKERS)]))
    assert cat.main(["--write", str(doc)]) == 0
    assert "| `out_of_play` |" in doc.read_text()
    assert cat.main([]) == 0
    assert "| `ball_in` |" in capsys.readouterr().out
