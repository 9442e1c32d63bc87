"""The structures and loads of benchmarks/strain_fatigue.py: three model files written as
docs/modelfile.md shows them, each with a virtual strain gauge at a hotspot, and a force
history with bursts and changing levels.

* ``beam``: examples/my_beam.toml (1 m steel cantilever, 20 Euler-Bernoulli elements,
  40 x 10 mm, a displacement sensor at the tip, the force at 0.7 m) with a strain gauge on the
  top face 50 mm from the clamp;
* ``plate``: 600 x 400 x 4 mm steel plate clamped along x = 0 (12 x 8 MITC3 cells), two
  displacement sensors at the free corners, the force at (0.45, 0.3), a strain gauge (top
  surface, along x) 25 mm from the clamp;
* ``frame``: a steel portal frame in the x-z plane (two 0.6 m columns, a 0.8 m girder,
  40 x 10 mm bars bending about their weak axis, fixed feet), the force vertical at 0.2 m
  on the girder, displacement sensors for the sway (ux at the right corner) and the girder's
  midspan (uz), a strain gauge on the outer face of the left column 20 mm below its joint
  with the girder.

The load is band-limited with ideal edges, so each force declares a steep roll-off
(``[[forces]] model = { order = 8 }``, as docs/load.md "Without a record" asks for a sharp
band): the plate's ``build --record`` ships the declaration (its held-out choice rejects the
model learned from the burst record, docs/load.md), and with the default order 2 its virtual
strain was 5.8x the limit.
"""

from __future__ import annotations

import numpy as np

MATERIAL = """
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
"""
COMMON = """
[damping]
ratios = [[8.0, 0.01], [300.0, 0.01]]

[estimator]
rate = 1000.0
method = "smoother"
"""

BEAM = f"""name = "strain-beam"
type = "beam"
{MATERIAL}
[beam.sections.bar]
material = "steel"
rectangle = {{ b = 0.04, h = 0.01 }}

[[beam.members]]
section = "bar"
line = {{ start = [0.0, 0.0, 0.0], end = [1.0, 0.0, 0.0], n = 20 }}

[[boundary]]
select = {{ at = [0.0, 0.0, 0.0] }}
{COMMON}
[reduction]                        # as examples/my_beam.toml
method = "gmr+"
modes = 10
[[reduction.masters]]
select = {{ at = [1.0, 0.0, 0.0] }}
dofs = ["uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.7, 0.0, 0.0] }}
dofs = ["uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.5, 0.0, 0.0] }}
dofs = ["uz", "ry"]

[[sensors]]
name = "d_tip"
select = {{ at = [1.0, 0.0, 0.0] }}
dof = "uz"
noise_std = NOISE_d_tip

[[forces]]
name = "F07"
select = {{ at = [0.7, 0.0, 0.0] }}
dof = "uz"
model = {{ order = 8 }}               # the load stops sharply at 100 Hz (docs/load.md)

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [0.05, 0.0, 0.005]

[design_load]
load = {{ type = "random", band = [2.0, 100.0], rms = RMS }}
"""

PLATE = f"""name = "strain-plate"
type = "plate"
{MATERIAL}
[plate]
material = "steel"
thickness = 4e-3

[plate.rectangle]
length = 0.6
width = 0.4
nx = 12
ny = 8

[[boundary]]
select = {{ group = "x0" }}
{COMMON}
[reduction]
method = "gmr+"
modes = 20
[[reduction.masters]]
select = {{ at = [0.05, 0.15, 0.0] }}
dofs = ["uz", "rx", "ry"]

[[sensors]]
name = "d_tip"
select = {{ at = [0.6, 0.0, 0.0] }}
dof = "uz"
noise_std = NOISE_d_tip

[[sensors]]
name = "d_tip2"
select = {{ at = [0.6, 0.4, 0.0] }}
dof = "uz"
noise_std = NOISE_d_tip2

[[forces]]
name = "F"
select = {{ at = [0.45, 0.3, 0.0] }}
dof = "uz"
model = {{ order = 8 }}               # the load stops sharply at 100 Hz (docs/load.md)

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [0.025, 0.15, 0.0]
surface = "top"
direction = [1.0, 0.0, 0.0]

[design_load]
load = {{ type = "random", band = [2.0, 100.0], rms = RMS }}
"""

FRAME = f"""name = "strain-frame"
type = "beam"
{MATERIAL}
[beam.sections.bar]
material = "steel"
rectangle = {{ b = 0.04, h = 0.01 }}   # h along local z: in-plane bending about the weak axis

[[beam.members]]
name = "left"
section = "bar"
line = {{ start = [0.0, 0.0, 0.0], end = [0.0, 0.0, 0.6], n = 12 }}
orientation = [1.0, 0.0, 0.0]          # local z along global x: h = 10 mm in the frame's plane

[[beam.members]]
name = "right"
section = "bar"
line = {{ start = [0.8, 0.0, 0.0], end = [0.8, 0.0, 0.6], n = 12 }}
orientation = [1.0, 0.0, 0.0]

[[beam.members]]
name = "girder"
section = "bar"
line = {{ start = [0.0, 0.0, 0.6], end = [0.8, 0.0, 0.6], n = 16 }}
orientation = [0.0, 0.0, 1.0]

[[boundary]]                           # fixed feet
select = {{ box = [[-0.01, -0.01, -0.01], [0.81, 0.01, 0.01]] }}
{COMMON}
[reduction]                            # statically exact at the masters (docs/reduction.md)
method = "cb+r"
modes = 12
[[reduction.masters]]
select = {{ at = [0.8, 0.0, 0.6] }}
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]                  # the output's element: the joint and the node below
select = {{ at = [0.0, 0.0, 0.6] }}
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.0, 0.0, 0.55] }}
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.4, 0.0, 0.6] }}
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.2, 0.0, 0.6] }}
dofs = ["ux", "uz", "ry"]

[[sensors]]
name = "d_sway"
select = {{ at = [0.8, 0.0, 0.6] }}
dof = "ux"
noise_std = NOISE_d_sway

[[sensors]]
name = "d_mid"
select = {{ at = [0.4, 0.0, 0.6] }}
dof = "uz"
noise_std = NOISE_d_mid

[[forces]]
name = "F"
select = {{ at = [0.2, 0.0, 0.6] }}
dof = "uz"
model = {{ order = 8 }}               # the load stops sharply at 100 Hz (docs/load.md)

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [-0.005, 0.0, 0.58]               # outer face of the left column, 20 mm below the joint

[design_load]
load = {{ type = "random", band = [2.0, 100.0], rms = RMS }}
"""

#: case -> (model template, base force RMS [N] of the level-1 segments)
CASES = {"beam": (BEAM, 8.0), "plate": (PLATE, 16.0), "frame": (FRAME, 30.0)}

#: relative levels of the load's envelope: quiet and normal operation, bursts
LEVELS = (0.4, 1.0, 2.5)
BAND = (2.0, 100.0)


def envelope(t: np.ndarray, seed: int, ramp: float = 0.02) -> np.ndarray:
    """Piecewise-constant level a(t) in LEVELS: segments of 2-6 s alternating quiet (0.4)
    and normal (1.0), bursts of 0.2-1.0 s at 2.5 starting every 3-9 s; raised-cosine
    transitions of ``ramp`` seconds (seeded, deterministic)."""
    rng = np.random.default_rng(seed)
    T = float(t[-1] - t[0])
    a = np.empty_like(t)
    edges, lv, x, k = [], [], 0.0, int(rng.integers(2))
    while x < T:
        d = rng.uniform(2.0, 6.0)
        edges.append(x)
        lv.append(LEVELS[k % 2])
        x, k = x + d, k + 1
    idx = np.searchsorted(np.array(edges), t - t[0], side="right") - 1
    a[:] = np.array(lv)[idx]
    x = rng.uniform(1.0, 4.0)
    while x < T:  # bursts over the segments
        a[(t - t[0] >= x) & (t - t[0] < x + rng.uniform(0.2, 1.0))] = LEVELS[2]
        x += rng.uniform(3.0, 9.0)
    n = max(int(round(ramp / (t[1] - t[0]))), 1)  # smooth the steps: a moving average
    w = np.hanning(n + 2)[1:-1]
    return np.convolve(np.pad(a, (n, n), mode="edge"), w / w.sum(), mode="same")[n:-n]


def burst_load(duration: float, rms: float, seed: int, rate: float = 10000.0):
    """(t, f): a Gaussian force band-limited to BAND (ideal FFT filter, unit RMS, as
    ``simulate --load random``) times ``rms`` times :func:`envelope`."""
    t = np.arange(int(round(duration * rate)) + 1) / rate
    rng = np.random.default_rng(seed)
    spec = np.fft.rfft(rng.standard_normal(t.size))
    fr = np.fft.rfftfreq(t.size, 1.0 / rate)
    spec[(fr < BAND[0]) | (fr > BAND[1])] = 0.0
    g = np.fft.irfft(spec, t.size)
    g /= np.std(g)
    return t, rms * envelope(t, seed + 1) * g


def level_weights(a: np.ndarray) -> dict:
    """{level: share of sum a^2} of an envelope's samples, each at its nearest level."""
    lv = np.array(LEVELS)
    k = np.abs(a[:, None] - lv[None, :]).argmin(axis=1)
    a2 = a ** 2
    return {float(lv[j]): float(a2[k == j].sum() / a2.sum()) for j in range(lv.size)}


class AverageSpectrum:
    """The expected average spectrum of a force ``rms a(t) g(t)``, ``g`` unit Gaussian flat
    over BAND and ``a`` the envelope on the record's rows, as a load of
    ``offline.limit.model.model_limit`` (``power_per_bin``): the product's spectrum is the
    convolution ``rms^2 (P_g * P_a)`` (``P_a`` the envelope's periodogram, Hann-windowed:
    the record's ends are no step of the load), so the level changes spread the band (on the
    frame's 40 s record 0.28 % of the force's power lies outside 2-100 Hz). ``scale``
    multiplies the power (the record's level, :func:`benchmarks.strain_fatigue.limits`)."""

    noise_std = None  # the sensors' noise: the model file's noise_std

    def __init__(self, a: np.ndarray, rms: float, dt: float, scale: float = 1.0):
        n = a.size
        f2 = np.fft.fftfreq(n, dt)
        pg = ((np.abs(f2) >= BAND[0]) & (np.abs(f2) <= BAND[1])).astype(float)
        pg /= pg.sum()                                        # two-sided, sum 1
        w = np.hanning(n)
        pa = np.abs(np.fft.fft(a * w)) ** 2
        pa *= np.mean(a ** 2) / pa.sum()                      # two-sided, sum mean(a^2)
        # P_f = rms^2 (P_g * P_a), circular convolution of two-sided powers per bin
        pf = rms ** 2 * np.real(np.fft.ifft(np.fft.fft(pg) * np.fft.fft(pa)))
        self.freqs = np.abs(f2[: n // 2 + 1])
        self.density = scale * np.maximum(pf[: n // 2 + 1], 0.0) * n * dt  # two-sided [N^2/Hz]
        self.a, self.rms, self.dt = a, rms, dt

    def scaled(self, scale: float) -> "AverageSpectrum":
        return AverageSpectrum(self.a, self.rms, self.dt, scale)

    def power_per_bin(self, n: int, dt: float) -> np.ndarray:
        """``(n // 2 + 1, 1, 1)`` two-sided power per one-sided bin (DC excluded)."""
        p = np.interp(np.fft.rfftfreq(n, dt), self.freqs, self.density) / (n * dt)
        p[0] = 0.0
        return p[:, None, None]

    def as_meta(self) -> dict:
        return {"type": "average spectrum of the burst load", "band": list(BAND)}

