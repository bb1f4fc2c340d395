"""Small vector helpers and the polynomial paths of the script.

People are steered onto exact cubic paths when they must be somewhere at a given knot
(meeting the ball, walking to a restart); a received ball is blended into the dribble
cycle by a cubic; a ball out of play is carried to the restart spot by a quintic that
starts with its velocity and ends at rest. Coefficients are tuples of arrays (one per
power of the time ``s`` since the start of the path), so that all the dimensions of a
path are evaluated at once.
"""

from __future__ import annotations

import math

import numpy as np


def unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to length 1 along its last axis (zero where it is zero)."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, n, out=np.zeros_like(v), where=n > 1e-12)


def clip_norm(v: np.ndarray, cap) -> np.ndarray:
    """``v`` (one vector per row) shortened where needed to length ``cap`` (a scalar or
    one per row)."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    cap = np.asarray(cap, np.float64).reshape(-1, 1) if np.ndim(cap) else cap
    scale = np.minimum(1.0, np.divide(cap, n, out=np.ones_like(n), where=n > 1e-12))
    return v * scale


def wrap(angle):
    """``angle`` (rad) wrapped into ``[-pi, pi)``."""
    return (angle + np.pi) % (2 * np.pi) - np.pi


def rotate(v, angle: float) -> np.ndarray:
    """The 2-vector ``v`` turned by ``angle`` (rad) counter-clockwise."""
    return np.array([v[0] * math.cos(angle) - v[1] * math.sin(angle),
                     v[0] * math.sin(angle) + v[1] * math.cos(angle)])


def cubic(p0, v0, p1, v1, T):
    """Coefficients of the cubic from ``(p0, v0)`` at 0 to ``(p1, v1)`` at ``T``."""
    d = p1 - p0
    c2 = (3 * d - (2 * v0 + v1) * T) / T**2
    c3 = (-2 * d + (v0 + v1) * T) / T**3
    return p0, v0, c2, c3


def cubic_position(coef, s):
    """Position on the cubic ``coef`` at time ``s`` (s) since its start."""
    c0, c1, c2, c3 = coef
    return c0 + c1 * s + c2 * s * s + c3 * s**3


def cubic_velocity(coef, s):
    """Velocity on the cubic ``coef`` at time ``s`` (s) since its start."""
    _, c1, c2, c3 = coef
    return c1 + 2 * c2 * s + 3 * c3 * s * s


def cubic_peak_acc(coef, T) -> float:
    """Largest acceleration on the cubic ``coef`` over ``[0, T]``: it changes linearly,
    so it peaks at one end."""
    _, _, c2, c3 = coef
    return float(max(np.linalg.norm(2 * c2), np.linalg.norm(2 * c2 + 6 * c3 * T)))


def quintic_to_rest(p0, v0, p1, T):
    """Coefficients of the quintic from ``(p0, v0, a=0)`` to ``(p1, 0, 0)`` over ``T``."""
    d = p1 - p0
    c3 = (10 * d - 6 * v0 * T) / T**3
    c4 = (-15 * d + 8 * v0 * T) / T**4
    c5 = (6 * d - 3 * v0 * T) / T**5
    return p0, v0, c3, c4, c5


def quintic_position(coef, s):
    """Positions (one row per time) on the quintic ``coef`` at the times ``s`` (s)."""
    p0, v0, c3, c4, c5 = coef
    s = s[:, None]
    return p0 + v0 * s + c3 * s**3 + c4 * s**4 + c5 * s**5


def quintic_peak_acc(coef, T) -> float:
    """Largest acceleration on the quintic ``coef`` over ``[0, T]``, on 41 sample times."""
    s = np.linspace(0, T, 41)[:, None]
    _, _, c3, c4, c5 = coef
    acc = 6 * c3 * s + 12 * c4 * s**2 + 20 * c5 * s**3
    return float(np.linalg.norm(acc, axis=1).max())
