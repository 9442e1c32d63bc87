"""Model-check bands of the smoother: resonance band pairs, the load-shape pair and their
thresholds."""

from __future__ import annotations

import math

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import modal_basis
from edge.estimator.chi2 import _norm_sf
from offline._deps import need

#: the load-shape pair's thresholds are widened by the load levels' half step in power: the
#: levels are a quarter decade apart in amplitude, the tracker holds the one nearest the
#: load, and a load half a step off tilts the whitened innovation spectrum by up to
#: 10^0.25 = 1.78 between a band the load dominates and one the noise dominates. The bound;
#: a bundle with load levels carries the tilt its own gains give (:func:`shape_margin`)
SHAPE_MARGIN = 10 ** 0.25
#: the smallest tilt the load-shape pair flags: a load of the declared band with ideal edges
#: against the model's second-order skirts read up to 1.36 with an honest std (the strip of
#: tests/test_shape_check.py, a 2 s window), a pink load in the footbridge's band 1.75 with
#: a std 0.32x its error (benchmarks/shape_check.py)
SHAPE_TOLERANCE = 1.5
#: the narrowest load band (f_hi / f_lo) that is split into a shape pair
SHAPE_MIN_SPAN = 4.0


def check_bands(bundle: Bundle, force_models=(), width: float = 0.08, fmax_frac: float = 0.4,
                min_participation: float = 1e-3):
    """Model-check bands: ``[f_i (1 - width), f_i]`` and ``[f_i, f_i (1 + width)]`` around
    every resonance ``f_i`` that the forces excite (the pair inside some force model's band
    and below ``fmax_frac * rate``) and the channels see (participation ``sum |Phi[channel
    dofs, i]| * sum |Phi[force dofs, i]|`` above ``min_participation`` of the largest). A
    shifted resonance moves innovation power from one band of the pair to the other; outside
    the load band the innovation there is noise plus the force model's roll-off, whose slope
    would bias the pair. Returns ``[(lo, hi), ...]`` [Hz]."""
    w2, Phi = modal_basis(bundle.M, bundle.K)
    f = np.sqrt(np.clip(w2, 0.0, None)) / (2 * np.pi)
    ch = np.sum(np.abs(Phi[[c.dof for c in bundle.channels]]), axis=0)
    fo = np.sum(np.abs(Phi[[x.dof for x in bundle.forces]]), axis=0)
    part = ch * fo
    inside = np.zeros(f.shape, bool)
    for fm in force_models:
        inside |= (f * (1 - width) >= fm.band[0]) & (f * (1 + width) <= fm.band[1])
    if not len(force_models):
        inside[:] = True
    keep = (f > 0) & inside & (f * (1 + width) < fmax_frac * bundle.rate) & \
        (part >= min_participation * np.max(part))
    bands = []
    for fi in f[keep]:
        bands += [(fi * (1 - width), fi), (fi, fi * (1 + width))]
    return bands


def shape_pair(force_models, rate: float, fmax_frac: float = 0.4):
    """The load-shape pair: the load band ``[f_lo, f_hi]`` (the force models' lowest lower
    and highest upper corner, at most ``fmax_frac * rate``) split at its geometric centre
    ``f_m``: ``[(f_lo, f_m), (f_m, f_hi)]``, or ``[]`` where the band spans less than
    :data:`SHAPE_MIN_SPAN` or there is no force model.

    For a right model the whitened innovation is white whatever the load's spectrum, so the
    powers of the two halves agree. A load of another shape than the model's (the footbridge
    of a user test, declared random 1-80 Hz, really 2.5-30 Hz with a resonance at 8 Hz: ratio
    3.57; a pink load in the declared band: 1.75; benchmarks/shape_check.py) puts more
    innovation power in one half; the level tracker cannot take it up (one level scales the
    whole band), and there the stated std is wrong (0.43x and 0.32x the error on those two). The resonance pairs do not see it:
    each spans 8 % of one resonance."""
    if not len(force_models):
        return []
    lo = min(float(fm.band[0]) for fm in force_models)
    hi = min(max(float(fm.band[1]) for fm in force_models), fmax_frac * rate)
    if not hi >= SHAPE_MIN_SPAN * lo:
        return []
    mid = math.sqrt(lo * hi)
    return [(lo, mid), (mid, hi)]


def shape_thresholds(stat, margin: float) -> np.ndarray:
    """The load-shape pair's two thresholds: the chi-square ones ``stat`` (of
    :func:`band_filters`) widened by ``margin`` (the tilt a load half a level off gives), at
    least :data:`SHAPE_TOLERANCE`."""
    return np.maximum(np.asarray(stat, dtype=float) * margin, SHAPE_TOLERANCE)


def _autocorrelation(b, a, n: int) -> np.ndarray:
    """``r(k) = sum_j h_j h_j+k``, k = 0..n-1, of the filter ``(b, a)``'s impulse response
    ``h`` over its first ``n`` samples (``r(0)`` its white-noise power gain)."""
    h = need("scipy.signal").lfilter(b, a, np.r_[1.0, np.zeros(n - 1)])
    return np.fft.irfft(np.abs(np.fft.rfft(h, 2 * n)) ** 2)[:n]


def band_filters(bands, rate: float, window: int, nch: int, p: float):
    """Biquads ``(nb, 5)`` [b0, b1, b2, a1, a2] (first-order Butterworth band-pass), their
    white-noise power gains ``g = sum h^2`` and the pair thresholds.

    A windowed band power of white innovations is chi-square with the effective degrees of
    freedom ``nu = window * nch * r(0)^2 / sum_k r(k)^2`` (r the filter's autocorrelation)
    divided by nu; the ratio of the two powers of a pair is then F(nu_lo, nu_hi), whose log is
    close to normal with variance ``2/nu_lo + 2/nu_hi``. Threshold of the pair ratio
    (two-sided, false-alarm probability p per window): ``exp(z_(p/2) sqrt(2/nu_lo +
    2/nu_hi))``, stored for both bands of the pair.
    """
    signal = need("scipy.signal")
    nb = len(bands)
    ba = np.zeros((nb, 5))
    gain = np.zeros(nb)
    nu = np.zeros(nb)
    for i, (lo, hi) in enumerate(bands):
        b, a = signal.butter(1, [lo, hi], "bandpass", fs=rate)
        b, a = b / a[0], a / a[0]
        ba[i] = [b[0], b[1], b[2], a[1], a[2]]
        n = int(min(max(40 * rate / max(hi - lo, 1e-3), 2000), 1_000_000))
        r = _autocorrelation(b, a, n)                               # r(k), k = 0..n-1
        gain[i] = float(r[0])                                       # sum h^2
        nu[i] = max(window * nch * r[0] ** 2 / (r[0] ** 2 + 2 * np.sum(r[1:] ** 2)), 1.0)
    # z with P(Z > z) = p / 2
    lo_z, hi_z = 0.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo_z + hi_z)
        lo_z, hi_z = (mid, hi_z) if _norm_sf(mid) > p / 2 else (lo_z, mid)
    thr = np.ones(nb)
    for i in range(0, nb - 1, 2):
        thr[i] = thr[i + 1] = np.exp(lo_z * np.sqrt(2 / nu[i] + 2 / nu[i + 1]))
    return ba, gain, thr


#: the most lags of a band filter's autocorrelation :func:`band_power_parts` sums (a band
#: whose filter rings longer keeps the bound :data:`SHAPE_MARGIN`)
MAX_LAGS = 6000


def band_power_parts(covs, H, R, Sinv, ba) -> np.ndarray | None:
    """``(nl, 2)``: per set of gains ``a`` the mean power per channel of the whitened
    innovation through the biquad ``ba`` [b0, b1, b2, a1, a2] over its white-noise gain, split
    into its part per unit load power and per unit sensor noise (1 in all for white
    innovations). With the innovation's autocovariance (``covs``:
    :func:`offline.smoother.error.error_covariances`, ``P = g^2 X + nu Y``)::

        R_e(0) = H P H^T + R,   R_e(m) = H Abar^m P H^T - H Abar^(m-1) (A K) R   (m >= 1)
        power = [r_h(0) tr(S^-1 R_e(0)) + 2 sum_m r_h(m) tr(S^-1 R_e(m))] / (r_h(0) nch)

    ``r_h`` the filter's autocorrelation, summed until it has decayed to 1e-9 (its poles'
    radius); None where that takes more than :data:`MAX_LAGS`."""
    b, a = ba[:3], np.r_[1.0, ba[3:]]
    rp = float(np.max(np.abs(np.roots(a))))
    rate_lags = int(np.ceil(np.log(1e-9) / np.log(rp))) if rp > 0 else 2
    if rp >= 1 or rate_lags > MAX_LAGS:
        return None
    r = _autocorrelation(b, a, rate_lags)
    nch = H.shape[0]
    out = np.zeros((len(covs), 2))
    for i, (AK, Abar, X, Y) in enumerate(covs):
        SH = Sinv[i] @ H                      # tr(S^-1 H M) = sum(SH * M^T)
        Mq, My, Mr = X @ H.T, Y @ H.T, AK @ R
        tq = r[0] * np.sum(SH * Mq.T)
        tr = r[0] * (np.sum(SH * My.T) + np.trace(Sinv[i] @ R))
        for m in range(1, rate_lags):
            Mq, My = Abar @ Mq, Abar @ My
            tq += 2 * r[m] * np.sum(SH * Mq.T)
            tr += 2 * r[m] * np.sum(SH * (My - Mr).T)
            Mr = Abar @ Mr
        out[i] = np.array([tq, tr]) / (r[0] * nch)
    return out


def shape_margin(grid, lo_parts, hi_parts) -> float:
    """The largest tilt ``rho(s) / rho(g_a^2)`` (or its inverse) of the load-shape pair's
    expected ratio ``rho(s) = (s q_lo + r_lo) / (s q_hi + r_hi)`` (:func:`band_power_parts`
    of each half) under the gains of a level ``a`` when the load's power ``s`` is half a grid
    step off (``g_a g_(a-1)`` or ``g_a g_(a+1)``): at most :data:`SHAPE_MARGIN`, 1 where both
    halves are dominated alike (the footbridge: 1.10; the three structures of
    benchmarks/honest_structures.py: 1.00-1.11)."""
    g = np.asarray(grid, dtype=float)
    worst = 1.0
    for a in range(g.size):
        def rho(s):
            return (s * lo_parts[a, 0] + lo_parts[a, 1]) / (s * hi_parts[a, 0] + hi_parts[a, 1])
        r0 = rho(g[a] ** 2)
        for s in (g[a] * g[max(a - 1, 0)], g[a] * g[min(a + 1, g.size - 1)]):
            q = rho(s) / r0
            worst = max(worst, q, 1.0 / q)
    return float(min(worst, SHAPE_MARGIN))
