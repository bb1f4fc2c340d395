"""The replay page (specula.soccer.replay_page): its sampling of the positions, which ball
it shows, and the page itself opened in headless Chromium.

The browser test needs Debian's Chromium at /usr/bin/chromium (`make test` installs it
with apt-get when it is missing) and the `playwright` package (the test extra). Rule:
without either it fails under CI (the `CI` variable set, as `.ci/run` sets it) and is
skipped elsewhere, saying what is missing; it never downloads a browser.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specula.soccer import replay_page as rp
from specula.soccer.debs2013 import Metadata
from specula.soccer.types import PICOS_PER_SECOND

CHROMIUM = Path("/usr/bin/chromium")
#: Chromium in a closed network: without these it stalls on connections it cannot make
#: (and, in a container, on a small /dev/shm; as root it needs --no-sandbox).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
READING = [("key", "i8"), ("ts", "i8"), ("x", "i8"), ("y", "i8")]
STEP = int(rp.FRAME_STEP_S * PICOS_PER_SECOND)


def _naive_frames(rows: np.ndarray, first: int, last: int) -> dict[tuple[int, int], tuple]:
    """Per (frame, sensor): the position of the sensor's latest reading in the frame."""
    out: dict[tuple[int, int], tuple] = {}
    latest: dict[tuple[int, int], int] = {}
    for key, ts, x, y in rows.tolist():
        if first <= ts <= last:
            cell = ((ts - first) // STEP, key)
            if ts > latest.get(cell, -1):
                latest[cell], out[cell] = ts, (x / 1e3, y / 1e3)
    return out


@st.composite
def _readings(draw):
    """Readings of up to 4 sensors over up to 2 s, no two of a sensor at one time (the
    latest of a frame is then one reading), cut into batches in a random order."""
    n = draw(st.integers(0, 60))
    keys = draw(st.lists(st.sampled_from([4, 13, 47, 105]), min_size=n, max_size=n))
    times = draw(st.lists(st.integers(0, 2 * PICOS_PER_SECOND), min_size=n, max_size=n))
    rows = np.array([(k, t, draw(st.integers(-60_000, 60_000)),
                      draw(st.integers(-60_000, 60_000)))
                     for k, t in {(k, t) for k, t in zip(keys, times, strict=True)}], READING)
    order = draw(st.permutations(range(len(rows))))
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=4)))
    shuffled = rows[list(order)] if len(rows) else rows
    return rows, np.split(shuffled, cuts)


@settings(max_examples=40, deadline=None)
@given(_readings(), st.integers(0, PICOS_PER_SECOND), st.integers(0, 2 * PICOS_PER_SECOND))
def test_frames_hold_each_sensors_latest_reading_of_the_frame_in_any_batch_order(
        drawn, first, length):
    rows, batches = drawn
    last = first + length
    frames = rp.sample_positions(batches, first, last)
    expected = _naive_frames(rows, first, last)
    assert len(frames.times_s) == length // STEP + 1
    assert np.allclose(frames.times_s, np.arange(len(frames.times_s)) * rp.FRAME_STEP_S)
    got = {(f, int(k)): (frames.x[f, c], frames.y[f, c])
           for c, k in enumerate(frames.sids) for f in range(len(frames.times_s))
           if not np.isnan(frames.x[f, c])}
    assert got == expected


def test_a_long_log_takes_longer_steps_not_more_frames():
    hour = 3600 * PICOS_PER_SECOND
    assert rp.frame_step_ps(0, hour) > STEP
    assert hour // rp.frame_step_ps(0, hour) + 1 <= rp.MAX_FRAMES


def test_a_player_is_the_mean_of_the_legs_that_read():
    rows = np.array([(13, 0, 1_000, 2_000), (14, 0, 3_000, 4_000), (13, STEP, 5_000, 0)],
                    READING)
    x, y = rp.sample_positions([rows], 0, STEP).of([13, 14])
    assert x.tolist() == [2.0, 5.0] and y.tolist() == [3.0, 0.0]


def test_the_ball_shown_is_the_one_ball_in_names_and_before_it_the_one_on_the_pitch():
    # ball 4 on the pitch throughout, ball 8 beside it until ball_in names it at frame 2
    rows = np.array([(sid, f * STEP, x, 0) for f in range(4)
                     for sid, x in ((4, 10_000), (8, -3_000))], READING)
    frames = rp.sample_positions([rows], 0, 3 * STEP)
    ball_in = np.array([(2 * STEP, 8, 0)], [("ts", "i8"), ("key", "i8"), ("seq", "i8")])
    x, _ = rp.ball_in_play(frames, [4, 8], ball_in, 0)
    assert x.tolist() == [10.0, 10.0, -3.0, -3.0]
    x, _ = rp.ball_in_play(frames, [4, 8], None, 0)
    assert x.tolist() == [10.0] * 4


@pytest.fixture(scope="module")
def browser():
    """Playwright's sync API, or the rule of the module docstring when the browser or the
    package is missing (before the match is generated: listed first, it runs first)."""
    missing = None if CHROMIUM.exists() else f"{CHROMIUM} (make test installs it: apt-get)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package (pip install -e '.[test]')"
    if missing is None:
        return sync_playwright
    if os.environ.get("CI"):
        pytest.fail(f"the browser test needs {missing}")
    pytest.skip(f"needs {missing}")


@pytest.fixture(scope="module")
def run_page(tmp_path_factory):
    """The page of a 3 s generated match through the soccer hierarchy with the queries,
    written as ``specula replay`` writes it: positions from a Parquet arrival table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from specula import InProcessRuntime
    from specula.pipelines.replay import ReplayResult
    from specula.soccer.graph import soccer_graph
    from specula.soccer.match import generate_match

    match = generate_match(3, profile="debs2013", seed=0)
    graph = soccer_graph(1.0, queries=True, metadata=match.metadata)
    report = InProcessRuntime(graph).run(match.events, step_ticks=100 * 10**9)
    out = tmp_path_factory.mktemp("run")
    (out / "arrival").mkdir()
    readings = match.events[match.events["key"] > 0]
    pq.write_table(pa.table({c: readings[c] for c in ("ts", "key", "x", "y")}),
                   out / "arrival" / "part-0.parquet")
    first, last = int(readings["ts"].min()), int(readings["ts"].max())
    summary = {"log": "generated debs2013 log, 3 s, seed 0", "first_ts": first,
               "last_ts": last, "played_seconds": 3, "events_in": len(readings)}
    result = ReplayResult(report, summary, {"arrival": str(out / "arrival")}, graph, match)
    page = rp.write_run_page(result, out)
    assert page == out / "report.html"
    return page, len(rp.sample_positions([readings], first, last).times_s)


@pytest.mark.slow  # a generated match through the hierarchy, and a browser
def test_the_page_renders_in_chromium_without_errors_and_plays(browser, run_page):
    path, frames = run_page
    assert path.stat().st_size < 8e6
    problems: list[str] = []
    with browser() as pw, tempfile.TemporaryDirectory() as profile:
        chromium = pw.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1400, "height": 1000})
        try:
            page = chromium.new_page()
            page.on("console", lambda m: problems.append(m.text) if m.type == "error"
                    else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(path.as_uri())
            page.wait_for_selector("#left-0 .main-svg", timeout=30_000)
            n_heat = page.locator("#right-3 .heatmaplayer").count()
            # the four movers and the cursor, then the timeline's rows of detections
            traces = page.evaluate("document.getElementById('left-0').data.length")
            assert page.evaluate("document.getElementById('left-0')"
                                 "._transitionData._frames.length") == frames
            shot = page.screenshot()
            cursor = ("(() => { const g = document.getElementById('left-0');"
                      " return g.data[g.data.length - 1].x[0]; })()")
            assert page.evaluate(cursor) == 0.0
            page.evaluate("Plotly.animate('left-0', null, {frame: {duration: 0, "
                          "redraw: false}, transition: {duration: 0}})")
            page.wait_for_function(f"{cursor} > {(frames - 2) * rp.FRAME_STEP_S}",
                                   timeout=10_000)
            # the heat maps' menu: its second entry shows the second player's map alone
            shown = page.evaluate(
                "(async () => { const g = document.getElementById('right-3');"
                " await Plotly.update(g, ...g.layout.updatemenus[0].buttons[1].args);"
                " return [g.data.map(d => d.visible), g.layout.title.text]; })()")
        finally:
            chromium.close()
    assert problems == []
    assert n_heat == 1  # the heat maps' figure: one player's map shown at a time
    assert traces > 5
    assert shown[0][:2] == [False, True] and not any(shown[0][2:])
    assert shown[1].startswith("heat map") and "attacks" in shown[1]
    _assert_drawn(shot)


def _assert_drawn(png: bytes) -> None:
    """The screenshot is a picture, not a blank page: many colours, none covering nearly
    all of it, and the pitch's grass a good part of it."""
    from io import BytesIO

    from matplotlib.image import imread

    pixels = (imread(BytesIO(png), format="png")[..., :3] * 255).round().astype(np.int64)
    codes = (pixels[..., 0] << 16) | (pixels[..., 1] << 8) | pixels[..., 2]
    _, counts = np.unique(codes, return_counts=True)
    assert len(counts) > 200, len(counts)
    assert counts.max() < 0.8 * codes.size
    grass = int(rp.GRASS[1:], 16)
    assert (codes == grass).mean() > 0.1


def test_the_page_of_a_run_without_heat_maps_or_detections_still_has_the_pitch():
    rows = np.array([(13, 0, 1_000, 2_000), (4, 0, 3_000, 4_000)], READING)
    html = rp.page(rp.sample_positions([rows], 0, 0), {}, Metadata.default(), 0, "empty")
    assert html.count('class="plotly-graph-div"') == 4  # match, possession, players, bars
    assert "heat map" not in html and "<h1>empty</h1>" in html


def test_a_run_without_an_arrival_table_gets_no_page(tmp_path):
    from specula.pipelines.replay import ReplayResult

    watch = ReplayResult(None, {"first_ts": 0, "last_ts": 1}, {}, None)  # type: ignore[arg-type]
    assert rp.write_run_page(watch, tmp_path) is None
    assert not (tmp_path / "report.html").exists()
