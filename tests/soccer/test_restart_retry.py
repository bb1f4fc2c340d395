"""A restart whose taker finds no pass open: the ball stays dead and he tries again."""

from __future__ import annotations

from specula.soccer.match import generate_match, kicks
from specula.soccer.match.bodies import KNOT_MS


def test_a_restart_without_an_open_pass_is_tried_again_a_knot_later(monkeypatch):
    """The kick-off's first try finds no pass (as a crowded restart can): the match goes
    on (it stopped on an assertion before), and the next restart try is one knot later."""
    real = kicks.pass_kick
    tries: list[int] = []

    def first_refused(bodies, rng, k_s, t, kicker, restart, *rest):
        if not restart:
            return real(bodies, rng, k_s, t, kicker, restart, *rest)
        tries.append(t)
        return None if len(tries) == 1 else real(bodies, rng, k_s, t, kicker, restart, *rest)

    monkeypatch.setattr(kicks, "pass_kick", first_refused)
    match = generate_match(10.0, seed=3)
    assert tries[1] == tries[0] + KNOT_MS
    assert len(match.truth.kicks) > 0
