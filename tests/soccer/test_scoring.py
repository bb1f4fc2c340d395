import numpy as np

from specula.soccer.scoring import score


def test_one_to_one_matching_within_tolerance():
    s = score(np.array([100, 205, 400, 900]), np.array([1, 1, 2, 1]),
              np.array([98, 200, 210, 500]), np.array([1, 1, 1, 2]), tolerance=10)
    # 100~98 and 205~200 (nearest free) match; 400 (id 2) is 100 away from 500; 900 extra
    assert (s.detected, s.truth, s.matched) == (4, 4, 2)
    assert s.precision == 0.5 and s.recall == 0.5


def test_empty_sides():
    e = np.array([], np.int64)
    assert score(e, e, e, e, 5).precision == 1.0
    assert score(np.array([1]), np.array([0]), e, e, 5).precision == 0.0
