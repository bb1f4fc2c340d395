import numpy as np

from specula.soccer.scoring import format_scores, score


def test_one_to_one_matching_within_tolerance():
    s = score(np.array([100, 205, 400, 900]), np.array([1, 1, 2, 1]),
              np.array([98, 200, 210, 500]), np.array([1, 1, 1, 2]), tolerance=10)
    # 100~98 and 205~200 (nearest free) match; 400 (id 2) is 100 away from 500; 900 extra
    assert (s.detected, s.truth, s.matched) == (4, 4, 2)
    assert s.precision == 0.5 and s.recall == 0.5


def test_empty_sides_have_no_score_where_there_is_nothing_to_score():
    """0/0 is no score: precision None without detections, recall None without true
    events ("n/a" in the table, null in the JSON)."""
    e = np.array([], np.int64)
    nothing = score(e, e, e, e, 5)
    assert (nothing.precision, nothing.recall) == (None, None)
    assert nothing.as_dict() == {"detected": 0, "truth": 0, "matched": 0,
                                 "precision": None, "recall": None}
    false = score(np.array([1]), np.array([0]), e, e, 5)
    assert (false.precision, false.recall) == (0.0, None)
    missed = score(e, e, np.array([1]), np.array([0]), 5)
    assert (missed.precision, missed.recall) == (None, 0.0)
    table = format_scores({"none": nothing, "false": false}).splitlines()
    assert table[1].split()[-2:] == ["n/a", "n/a"] and table[2].split()[-2:] == ["0.000", "n/a"]
