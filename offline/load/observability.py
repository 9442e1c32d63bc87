"""Which combinations of the loads the sensors can see at all.

Per frequency the sensors see the loads through the noise-whitened transfer matrix, each
load in units of its declared size::

    H_w(f) = N^-1/2 H(f) D,   N = diag(noise_std^2),   D = diag(PSD_j^1/2 at the band centre)

Its rank is the number of independent load combinations the records carry; a direction
``u`` of its null space (``H_w u = 0``) moves no sensor, so no record of any length tells
the loads apart along it, and an estimator splits them there as its load model (the
declaration) says. Two loads on one side of a cut through the structure, seen only from the
other side, are the common case: the sensors see the shear and the moment the cut
transmits, two numbers, whatever the number of loads behind it.
"""

from __future__ import annotations

import numpy as np

from edge.kinds import kind_order
from offline.limit.model import noise_std

#: singular values below this fraction of the largest count as zero (the structure's own
#: rank deficiency is at round-off level, ~1e-10; a weakly seen load is far above it)
RTOL = 1e-6


def blind_directions(H, noise_std, scale, rtol: float = RTOL):
    """Rank and null-space projector of the whitened transfer matrices.

    Parameters
    ----------
    H : (nfreq, nch, nf) complex transfer matrices [channel unit / load unit]
    noise_std : (nch,) each channel's noise std [channel unit]
    scale : (nf,) each load's size [load unit] (declared PSD^1/2 at its band centre)

    Returns
    -------
    rank : (nfreq,) int, the number of independent load combinations seen at each frequency
    P : (nfreq, nf, nf) complex, the projector onto the blind directions (in units of ``scale``)
    """
    H = np.asarray(H)
    Hw = H / np.asarray(noise_std, float)[None, :, None] * np.asarray(scale, float)[None, None, :]
    nf = H.shape[2]
    # full_matrices: a load count above the channel count leaves nf - nch blind directions
    _, s, Vh = np.linalg.svd(Hw, full_matrices=True)
    s_all = np.zeros((H.shape[0], nf))
    s_all[:, :s.shape[1]] = s
    seen = s_all > rtol * np.maximum(s_all[:, :1], 1e-300)
    rank = seen.sum(axis=1)
    V = np.conj(np.transpose(Vh, (0, 2, 1)))          # columns: right singular vectors
    Vb = V * (~seen)[:, None, :]
    return rank, Vb @ np.conj(np.transpose(Vb, (0, 2, 1)))


def blind_loads_warning(mm, load_model, sensor_kinds, noise_std, dt: float, names,
                        n: int = 48, share: float = 0.05) -> str | None:
    """A warning naming the loads the sensors cannot tell apart, or None.

    Evaluated on ``n`` log-spaced frequencies across the loads' declared bands (up to 0.45
    of the sample rate); reported when fewer combinations than loads are seen at more than
    half of them. A load is named when at least ``share`` of its size lies in the blind
    directions (the mean of the projector's diagonal).

    Parameters
    ----------
    mm : ModalModel whose first probes are the sensors
    load_model : LoadModel (its forces' bands and sizes)
    sensor_kinds : (nch,) "displacement", "velocity" or "acceleration"
    noise_std : (nch,) absolute noise std of each sensor
    dt : sample interval [s];  names : (nf,) load names
    """
    forces = load_model.forces
    nf, nch = len(forces), len(sensor_kinds)
    if nf < 2:
        return None
    lo = max(min(fm.band[0] for fm in forces), 1e-3)
    hi = min(max(fm.band[1] for fm in forces), 0.45 / dt)
    if not hi > lo:
        return None
    f = np.geomspace(lo, hi, n)
    kinds = [kind_order(k) for k in sensor_kinds]  # derivative order: a gauge reads u
    H = mm.transfer(f, kinds + [0] * (mm.Phi_out.shape[0] - nch))[:, :nch]
    scale = [float(np.sqrt(fm.psd([np.sqrt(fm.band[0] * fm.band[1])])[0])) for fm in forces]
    rank, P = blind_directions(H, noise_std, scale)
    short = rank < nf
    if np.count_nonzero(short) <= n // 2:
        return None
    weight = np.real(np.einsum("kjj->j", P[short])) / np.count_nonzero(short)
    who = [nm for nm, w in zip(names, weight) if w >= share]
    r = int(np.median(rank[short]))
    f_lo, f_hi = float(f[short].min()), float(f[short].max())
    return (f"the sensors see {r} independent combination(s) of the {nf} loads at "
            f"{f_lo:.3g}-{f_hi:.3g} Hz: {', '.join(who)} cannot be told apart beyond that by "
            f"any record, and the estimate splits them as the load model says (e.g. loads on "
            f"one side of the structure seen only from the other: a sensor between them, or "
            f"their declared sizes and correlation, decide the split)")


def seen_from(f, snr) -> float | None:
    """The frequency from which ``snr`` stays >= 1 up to ``f[-1]`` (log-log interpolation
    at the last crossing), ``f[0]`` when it never falls below 1, None when it ends below 1."""
    f, snr = np.asarray(f, float), np.asarray(snr, float)
    below = np.flatnonzero(snr < 1.0)
    if below.size == 0:
        return float(f[0])
    k = int(below[-1])
    if k == f.size - 1:
        return None
    a, b = np.log(max(snr[k], 1e-300)), np.log(snr[k + 1])
    w = -a / (b - a)  # where log snr = 0 between f[k] and f[k + 1]
    return float(np.exp((1.0 - w) * np.log(f[k]) + w * np.log(f[k + 1])))


def unseen_low_band_warning(mm, load_model, sensor_kinds, noise_std, dt: float, names,
                            n: int = 96, below: float = 10.0, warn_at: float = 3.0) -> str | None:
    """A warning naming the loads whose low-frequency part the sensors do not see, or None.

    Per load ``j`` alone, at its load model's density ``S_jj(f)`` (two-sided; below the
    band's lower edge ``f_lo`` carried on at its value there), the signal-to-noise ratio per
    frequency against the sensors' white noise (two-sided density ``sigma_i^2 dt``)::

        SNR_j(f) = S_jj(f) sum_i |H_ij(f)|^2 / (sigma_i^2 dt)

    is the Wiener gain's odds at ``f``: where it is below 1 the posterior of the load's
    component keeps more than half of its prior variance, so the estimate and its stated
    std there are the load model's, whatever the records say. Evaluated on ``n`` log-spaced
    frequencies from ``f_lo / below`` to the band's geometric centre; reported when the SNR
    stays >= 1 only from above ``f_lo / warn_at`` up (or nowhere). Below the lowest mode an
    accelerometer's response falls as ``f^2``, a displacement's or a strain's stays at the
    static one: accelerometers alone leave a load's quasi-static part unseen (an acceptance
    test's clamped plate, two accelerometers, declared 3-200 Hz, under a load flat up to
    10 Hz: seen from 4.2 Hz, 1-sigma coverage 10 %).
    """
    lines = []
    kinds = [kind_order(k) for k in sensor_kinds]
    nch = len(kinds)
    sigma2 = np.asarray(noise_std, float) ** 2 * dt
    for j, fm in enumerate(load_model.forces):
        lo, hi = float(fm.band[0]), min(float(fm.band[1]), 0.45 / dt)
        if not (lo > 0 and hi > lo):
            continue
        f = np.geomspace(lo / below, np.sqrt(lo * hi), n)
        H = mm.transfer(f, kinds + [0] * (mm.Phi_out.shape[0] - nch))[:, :nch, j]
        S = np.real(load_model.psd(np.maximum(f, lo))[:, j, j])
        snr = S * np.sum(np.abs(H) ** 2 / sigma2[None, :], axis=1)
        f_see = seen_from(f, snr)
        if f_see is None:
            lines.append(f"{names[j]} anywhere up to {f[-1]:.3g} Hz (its band from {lo:g} Hz)")
        elif f_see > lo / warn_at:
            lines.append(f"{names[j]} below {f_see:.3g} Hz (its band from {lo:g} Hz)")
    if not lines:
        return None
    return ("the sensors do not see these loads above their noise (a signal-to-noise ratio "
            "per frequency of 1 at the load model's level, its density carried on below the "
            "band): " + "; ".join(lines) + ". There the estimate and its stated std come from "
            "the load model, not from the measurements: a load with more power there (a "
            "quasi-static part, a slow drift, a pink spectrum) is estimated worse than the std "
            "states, and the device's model check cannot see it. A sensor with a static "
            "response near the load (displacement, strain) or lower noise sees it; otherwise "
            "declare the load's band as it really is")


def bundle_load_warnings(mm, load_model, bundle, spec) -> list[str]:
    """:func:`blind_loads_warning` and :func:`unseen_low_band_warning` for a bundle built
    from ``spec``: its channels, forces and sample interval; the load model's noise, else
    the model file's."""
    noise = (load_model.noise_std if load_model.noise_std is not None
             else noise_std(spec, mm, bundle.dt))
    args = (mm, load_model, [c.kind for c in bundle.channels], noise, bundle.dt,
            [f.name for f in bundle.forces])
    return [w for w in (blind_loads_warning(*args), unseen_low_band_warning(*args)) if w]
