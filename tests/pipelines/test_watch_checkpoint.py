"""A watch's checkpoints commit its output in two phases: whatever step of a commit a
crash interrupts, the folder put back by ``recover`` holds the rows of the committed
checkpoints, each once, in about one file per type (compaction), and the graph's
state of the last one; the last record counts those rows (what a watch's summary
reports for the whole run)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from specula.pipelines import watch_checkpoint as wc
from specula.pipelines.synthetic import example_graph


class CrashError(Exception):
    """The driver dies here."""


def _rows(graph, rng: np.random.Generator, first_seq: int) -> dict[str, dict[str, np.ndarray]]:
    """Random output of ``graph``'s nodes for one segment: some nodes and tables empty."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for table in wc.LIVE_TABLES:
        per_node = {}
        for name, node in graph.nodes.items():
            types = node.inputs if table == "late" else node.outputs
            n = int(rng.integers(0, 4))
            rows = np.zeros(n, graph.registry.dtype(types))
            rows["type"] = [graph.registry.id(t) for t in rng.choice(types, n)]
            rows["seq"] = first_seq + np.arange(n)
            rows["ts"] = rng.integers(0, 10**15, n)
            per_node[name] = rows
        if any(len(r) for r in per_node.values()):
            out[table] = per_node
    return out


def _content(rows: dict[str, np.ndarray], registry) -> list[tuple]:
    return [(node, registry.types()[int(t) - 1].name, int(s), int(ts))
            for node, r in rows.items() for t, s, ts in zip(r["type"], r["seq"], r["ts"],
                                                            strict=True)]


def _table(out: Path, table: str) -> list[tuple]:
    if not any(Path(out, table).rglob("*.parquet")):
        return []
    data = pq.read_table(out / table).to_pandas()
    return list(zip(data["detector"], data["event_type"].astype(str), data["seq"], data["ts"],
                    strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_a_crash_at_any_step_of_a_commit_leaves_the_committed_rows_each_once(
        tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    graph = example_graph(0.0, "on-demand")
    registry = graph.registry
    out = tmp_path / "run"
    out.mkdir()
    segments = [_rows(graph, rng, 100 * k) for k in range(6)]
    crash_at = int(rng.integers(1, 60))  # the step of all commits' that fails
    steps = [0]

    def step(real):
        def wrapped(*args, **kwargs):
            steps[0] += 1
            if steps[0] == crash_at:
                raise CrashError
            return real(*args, **kwargs)
        return wrapped

    with monkeypatch.context() as m:
        m.setattr(wc, "_write", step(wc._write))
        m.setattr(os, "replace", step(os.replace))
        m.setattr(Path, "unlink", step(Path.unlink))
        m.setattr(wc.shutil, "copytree", step(wc.shutil.copytree))
        try:
            for k, rows in enumerate(segments):
                (out / "state").mkdir(exist_ok=True)
                (out / "state" / "cut").write_text(str(k))
                wc.commit(out, 1, k, {"rows": k}, {}, rows, registry)
        except CrashError:
            pass
    (out / "state" / "cut").write_text("after the last checkpoint")
    last = wc.recover(out, [])
    done = -1 if last is None else last.id
    for table in wc.LIVE_TABLES:
        want = sorted(row for rows in segments[:done + 1] for row in
                      _content(rows.get(table, {}), registry))
        assert sorted(_table(out, table)) == want, (table, crash_at)
        for folder in Path(out, table).glob("event_type=*"):
            assert len(list(folder.glob("*.parquet"))) == 1  # compacted
    assert not (out / "_staging").exists()
    if last is None:
        assert not (out / "state").exists()
    else:
        assert last.counts == {"rows": done} and last.handed == done
        assert (out / "state" / "cut").read_text() == str(done)
    _counts_agree(out, last)
    # the next checkpoint after a recovery commits on top of it
    after = wc.commit(out, 2, 99, {}, {}, segments[0], registry)
    assert sorted(_table(out, "complex")) == sorted(
        row for rows in [*segments[:done + 1], segments[0]]
        for row in _content(rows.get("complex", {}), registry))
    _counts_agree(out, after)


def _counts_agree(out: Path, record: wc.WatchCheckpoint | None) -> None:
    """What ``record`` says the watches committed (what a watch's summary counts) is
    what the tables hold: detections per type and per node, late events."""
    committed = record.committed if record is not None else wc.Committed()
    complex_rows, late = _table(out, "complex"), _table(out, "late")
    by_type = Counter(t for _, t, _, _ in complex_rows)
    assert {t: n for t, n in committed.detected.items() if n} == dict(by_type)
    by_node = Counter(node for node, _, _, _ in complex_rows)
    assert {d: n for d, n in committed.net_events.items() if n} == dict(by_node)
    assert committed.late == len(late)


def test_a_record_that_does_not_read_is_refused_with_what_to_do(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "000003.json").write_text("{")
    with pytest.raises(ValueError, match=r"000003.json: not a watch checkpoint .*new --out"):
        wc.last_checkpoint(tmp_path)
