"""Sensor readings from the simulated match: each transmitter at its own times.

Every transmitter reads at its own exact, constant period, from a random phase, as the
real sensors do (:func:`sensor_period_ps`); worn sensors drop out now and then
(:func:`dropouts`). The ball in play is read off its 1 ms grid by linear
interpolation (position, and velocity and acceleration by central differences on that
grid); the spare balls lie still, reading the noise of a resting ball
(:func:`resting_noise`); a wearer's sensor sits on his limb beside the Hermite
curve of his body, with ``|v|`` and ``|a|`` by finite differences over its own readings.
The readings are converted to DEBS units and written straight to their rows of the
stream sorted by time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specula.events import distinct
from specula.soccer.debs2013 import LEFT_ARM, LEFT_LEG, RIGHT_ARM, RIGHT_LEG
from specula.soccer.match.bodies import Bodies
from specula.soccer.match.physics import BALL_RADIUS
from specula.soccer.match.profiles import SPARE_SPOTS, Cast
from specula.soccer.types import soccer_registry

FOOT_Z = 0.12  # height of leg sensors, m
ARM_Z = 1.30  # height of arm sensors, m
LEG_SIDE = 0.10  # legs are 0.2 m apart: each is this far to the side of the body, m
ARM_SIDE = 0.22  # arm sensors are this far to the side of the body, m
#: Offset of each limb's sensor to the left of the body (m), and its height (m).
LIMB_SIDE = {LEFT_LEG: LEG_SIDE, RIGHT_LEG: -LEG_SIDE, LEFT_ARM: ARM_SIDE,
              RIGHT_ARM: -ARM_SIDE}
LIMB_Z = {LEFT_LEG: FOOT_Z, RIGHT_LEG: FOOT_Z, LEFT_ARM: ARM_Z, RIGHT_ARM: ARM_Z}
#: The periods of the DEBS 2013 game's balls (ps), measured on the real rows (the
#: bundled pre-game sample: each constant to within 1.5 ns). Ball 12, in play only in the
#: second half, is not in the sample: its period continues the step from 8 to 10.
BALL_PERIOD_PS = {4: 488_044_685, 8: 511_996_164, 10: 527_996_873, 12: 543_997_582}
#: The period of a sensor worn by a player or the referee in the DEBS 2013 game: a line
#: in its id, ``WEARER_PERIOD_PS[0] + WEARER_PERIOD_PS[1] * sid`` (least squares over
#: the 37 wearer sensors of the sample; largest residual 0.046 %, 2.1 us).
WEARER_PERIOD_PS = (4_487_292_570, 6_410_427)


def sensor_period_ps(sid: int, ball: bool, hz: float, real_ids: bool) -> int:
    """A transmitter's reading period in ps: the real sensors' law (balls by id, worn
    sensors a line in the id) for the DEBS 2013 game's ids (``real_ids``), else the
    exact nominal period ``1/hz`` (invented ids have no real counterpart)."""
    if not real_ids:
        return round(1e12 / hz)
    if not ball:
        return WEARER_PERIOD_PS[0] + WEARER_PERIOD_PS[1] * sid
    return BALL_PERIOD_PS[sid] if sid in BALL_PERIOD_PS else round(1e12 / hz)


def sample_times(rng: np.random.Generator, period_ps: int, duration_ps: int) -> np.ndarray:
    """Reading times (ps since the start) of one transmitter: every ``period_ps`` from a
    random phase."""
    phase = int(rng.integers(0, period_ps))
    return np.arange(phase, duration_ps, period_ps, dtype=np.int64)


#: Worn sensors drop out now and then, as the real ones do (the bundled sample holds a
#: 113 ms gap of one sensor in about 200 sensor-seconds): on average once every this many
#: seconds per sensor, for a time drawn uniformly from ``DROPOUT_MS``.
DROPOUT_EVERY_S = 200.0
DROPOUT_MS = (20.0, 120.0)


def dropouts(rng: np.random.Generator, t: np.ndarray, duration_ps: int) -> np.ndarray:
    """The reading times ``t`` (ps since the start) of one sensor with its dropouts cut
    out: gaps that start as a Poisson process (:data:`DROPOUT_EVERY_S`) and last
    :data:`DROPOUT_MS`."""
    n = int(rng.poisson(duration_ps / 1e12 / DROPOUT_EVERY_S))
    starts = rng.uniform(0, duration_ps, n)
    ends = starts + rng.uniform(*DROPOUT_MS, n) * 1e9
    gone = np.zeros(len(t), bool)
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        gone |= (t >= a) & (t < b)
    return t[~gone]


#: A ball lying still still reads noise, as the real sample's resting balls do (balls 8
#: and 10 of ``tests/data/debs2013``: |a| median 6.8 and 7.2 m/s^2, 5th-95th
#: percentiles about 2-20, at most 27; |v| median 0.13-0.15 m/s, at most 0.42;
#: positions within a couple of mm): |a| and |v| log-normal around these medians,
#: capped at the sample's largest, and the position jittered by a normal of these
#: deviations (mm).
REST_A_MEDIAN, REST_A_SIGMA, REST_A_MAX = 7.0, 0.55, 27.0  # m/s^2, log-scale sd, m/s^2
REST_V_MEDIAN, REST_V_SIGMA, REST_V_MAX = 0.14, 0.5, 0.42  # m/s, log-scale sd, m/s
REST_JITTER_MM = (1.5, 1.5, 3.5)  # x, y, z


def resting_noise(rng: np.random.Generator, n: int):
    """Position jitter (m), velocity and acceleration (m/s, m/s^2) of ``n`` readings of a
    ball lying still: sensor noise like the real sample's resting balls."""
    jitter = rng.normal(0.0, 1.0, (n, 3)) * np.array(REST_JITTER_MM) / 1000.0
    v = np.minimum(REST_V_MEDIAN * np.exp(rng.normal(0.0, REST_V_SIGMA, n)), REST_V_MAX)
    a = np.minimum(REST_A_MEDIAN * np.exp(rng.normal(0.0, REST_A_SIGMA, n)), REST_A_MAX)

    def along_random(length: np.ndarray) -> np.ndarray:
        d = rng.normal(size=(n, 3))
        return d / np.linalg.norm(d, axis=1, keepdims=True) * length[:, None]

    return jitter, along_random(v), along_random(a)


def finite_differences(t_s: np.ndarray, pos: np.ndarray):
    """Velocity and acceleration of one transmitter's readings by central differences
    on its own (non-uniform) time stamps; one-sided at the ends."""
    n = len(t_s)
    vel = np.zeros_like(pos)
    acc = np.zeros_like(pos)
    if n < 2:
        return vel, acc
    dt = np.diff(t_s)[:, None]
    slope = np.diff(pos, axis=0) / dt
    vel[1:-1] = (pos[2:] - pos[:-2]) / (t_s[2:] - t_s[:-2])[:, None]
    vel[0], vel[-1] = slope[0], slope[-1]
    if n >= 3:
        acc[1:-1] = 2 * (slope[1:] - slope[:-1]) / (t_s[2:] - t_s[:-2])[:, None]
        acc[0], acc[-1] = acc[1], acc[-2]
    return vel, acc


def directions(vec: np.ndarray, rng: np.random.Generator):
    """``|vec|`` and the direction scaled to length 10,000. A real sensor at rest still
    reports a direction of that length (its noise), so a zero vector gets a random one."""
    norm = np.linalg.norm(vec, axis=1)
    still = norm <= 1e-9
    if still.any():
        vec = vec.copy()
        vec[still] = rng.normal(size=(int(still.sum()), 3))
    scaled = vec * (10_000.0 / np.linalg.norm(vec, axis=1))[:, None]
    return norm, np.round(scaled).astype(np.int32)


@njit(cache=True, nogil=True)
def _place(events, rows, ts, sid, type_id, mm, speed, accel, vdir, adir, player, team, limb,
           start_ps):  # pragma: no cover - compiled
    """Write one transmitter's readings (DEBS units) into ``events`` at ``rows``, a record
    at a time (far faster than strided writes of whole columns into a structured array)."""
    for j in range(rows.shape[0]):
        i = rows[j]
        r = events[i]
        r.ts = ts[j] + start_ps
        r.type = type_id
        r.key = sid
        r.seq = i
        r.ats = ts[j] + start_ps
        r.x = mm[j, 0]
        r.y = mm[j, 1]
        r.z = mm[j, 2]
        r.v = speed[j]
        r.a = accel[j]
        r.vx = vdir[j, 0]
        r.vy = vdir[j, 1]
        r.vz = vdir[j, 2]
        r.ax = adir[j, 0]
        r.ay = adir[j, 1]
        r.az = adir[j, 2]
        r.player = player
        r.team = team
        r.limb = limb


def _put(events: np.ndarray, rows: np.ndarray, ts: np.ndarray, sid: int, type_id: int,
         pos: np.ndarray, vel: np.ndarray, acc: np.ndarray, player: int, team: int, limb: int,
         start_ps: int, rng: np.random.Generator) -> None:
    """Convert one transmitter's readings (m, m/s, m/s^2) to DEBS units and place them."""
    speed, vdir = directions(vel, rng)
    accel, adir = directions(acc, rng)
    _place(events, rows, ts, sid, type_id, np.round(pos * 1000.0).astype(np.int64),
           np.round(speed * 1e6).astype(np.int64), np.round(accel * 1e6).astype(np.int64),
           vdir, adir, player, team, limb, start_ps)


def _ball_readings(ball: np.ndarray, t: np.ndarray, duration_ps: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity and acceleration of the ball in play at the times ``t`` (ps
    since the start): linear interpolation on its 1 ms grid ``ball``, with velocity and
    acceleration by central differences of the grid's positions; where it lies still
    (waiting for a restart), the noise of a resting ball."""
    n_grid = int(duration_ps // 10**9) + 3
    grid = ball[:n_grid + 1]
    grid_vel = np.zeros_like(grid)
    grid_acc = np.zeros_like(grid)
    grid_vel[1:-1] = (grid[2:] - grid[:-2]) / 2e-3
    grid_acc[1:-1] = (grid[2:] - 2 * grid[1:-1] + grid[:-2]) / 1e-6
    grid_vel[0], grid_acc[0] = grid_vel[1], grid_acc[1]
    t_ms = t / 1e9
    step = np.minimum(t_ms.astype(np.int64), n_grid - 1)
    weight = (t_ms - step)[:, None]

    def lerp(a):
        return a[step] * (1 - weight) + a[step + 1] * weight

    pos, vel, acc = lerp(grid), lerp(grid_vel), lerp(grid_acc)
    still = ~(np.abs(vel).any(axis=1) | np.abs(acc).any(axis=1))
    if still.any():
        jitter, vel[still], acc[still] = resting_noise(rng, int(still.sum()))
        pos[still] += jitter
    return pos, vel, acc


def sample(cast: Cast, bodies: Bodies, ball: np.ndarray, rng: np.random.Generator,
           start_ps: int, duration_ps: int) -> np.ndarray:
    """Sample every transmitter at its own times and return the stream sorted by ``ts``.

    ``bodies`` are the people's knots and ``ball`` the ball's centre on the 1 ms grid (m)
    of the played script; ``start_ps`` is the sensor time of the first ms. All reading
    times are drawn first, so that each transmitter's readings can be written straight
    to their rows of the sorted stream.
    """
    registry = soccer_registry()
    profile = cast.profile
    ball_id = registry.id("ball")
    real = profile.name == "debs2013"  # the real game's sensor ids
    times = [sample_times(rng, sensor_period_ps(sid, True, profile.ball_hz, real), duration_ps)
             for sid in (profile.ball_in_play, *profile.spare_balls)]
    wearers = [(person, sid, limb) for person, sensors in enumerate(cast.sensors)
               for sid, limb in sensors]
    times += [sample_times(rng, sensor_period_ps(sid, False, profile.wearer_hz, real),
                           duration_ps) for _, sid, _ in wearers]
    # dropouts from a stream of their own, so that they change no other draw
    gaps = rng.spawn(1)[0]
    times[1 + len(profile.spare_balls):] = [dropouts(gaps, t, duration_ps)
                                            for t in times[1 + len(profile.spare_balls):]]
    bounds = np.cumsum([0] + [len(t) for t in times])
    order = np.argsort(np.concatenate(times), kind="stable")
    row_of = np.empty_like(order)
    row_of[order] = np.arange(len(order))
    events = np.zeros(len(order), registry.dtype(["ball", "player", "referee"]))

    def rows(n: int) -> np.ndarray:
        return row_of[bounds[n]:bounds[n + 1]]

    _put(events, rows(0), times[0], profile.ball_in_play, ball_id,
         *_ball_readings(ball, times[0], duration_ps, rng), 0, 0, 0, start_ps, rng)
    for j, sid in enumerate(profile.spare_balls):
        t = times[1 + j]
        spot = np.array([*SPARE_SPOTS[j % len(SPARE_SPOTS)], BALL_RADIUS])
        jitter, vel, acc = resting_noise(rng, len(t))
        _put(events, rows(1 + j), t, sid, ball_id, spot + jitter, vel, acc, 0, 0, 0, start_ps,
             rng)
    # Wearers: their limbs around the Hermite curve of the body, at their own times.
    first = 1 + len(profile.spare_balls)
    for n, (person, sid, limb) in enumerate(wearers, start=first):
        t = times[n]
        is_ref = person == cast.referee
        x, _, y, _, heading, _ = bodies.evaluate(np.full(len(t), person), t / 1e9)
        side = LIMB_SIDE[limb]
        pos = np.stack([x - side * np.sin(heading), y + side * np.cos(heading),
                        np.full(len(t), LIMB_Z[limb])], axis=1)
        vel, acc = finite_differences(t / 1e12, pos)
        _put(events, rows(n), t, sid, registry.id(cast.type_name[person]), pos, vel, acc,
             -1 if is_ref else person, -1 if is_ref else int(cast.team[person]), limb,
             start_ps, rng)
    return events


def measured_periods(events: np.ndarray) -> dict[int, float]:
    """The median time between two readings of each sensor (ps) in a position stream,
    for sensors with at least three readings: what a realism check compares."""
    out = {}
    for sid in distinct(events["key"]).tolist():
        ts = np.sort(events["ts"][events["key"] == sid])
        if len(ts) >= 3:
            out[int(sid)] = float(np.median(np.diff(ts)))
    return out


def period_errors_pct(events: np.ndarray, real: dict[int, float], balls: set[int]
                      ) -> dict[int, float]:
    """How far each sensor's period in a generated DEBS 2013 stream is from the real one,
    in percent: from ``real`` (periods measured on real rows, by sensor id) where it has
    the sensor, else from the law of :func:`sensor_period_ps`."""
    out = {}
    for sid, period in measured_periods(events).items():
        want = real.get(sid) or sensor_period_ps(sid, sid in balls, 1.0, True)
        out[sid] = abs(period - want) / want * 100
    return out
