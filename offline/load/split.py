"""What a record can tell about the split of the loads, and the load model that learns only
that.

Per frequency the sensors see the loads through the noise-whitened transfer matrix, each load
in units of its declared size (:mod:`offline.load.observability`, :mod:`offline.load.sources`)::

    H_w(f) = (s^2 dt)^-1/2 H(f) D,   D = diag(declared PSD_j^1/2 at its band centre)

A singular value ``sigma_i(f) >= 1`` is a load combination whose response, at the declared
size, stands above the sensors' noise in that bin: the records tell its spectrum. Where fewer
than the number of loads stand above it (loads on one side of a cut seen from the other: the
sensors see the shear and the moment the cut transmits), the records do not tell how the
response splits between the loads: a learned model splits it as its family and the prior's
width happen to allow (the interface receiver: moments learned 5-9x too large, every target
2-4x worse than declared), and the held-out likelihood of the SENSORS, which sees only the
seen combinations, cannot judge that split.

So there the learned candidates give way to one that learns only what the record tells: the
declaration's split (its forces' relative sizes, shapes and correlation) times one spectrum
shape common to all loads, learned from the records::

    S_ff(f) = |c(f)|^2 S_ff,declared(f)

``c``: a level, a shift of the band corners, a change of their span and of the tilt (each
force's own band moves by the same factors: exact for loads declared with one shape), the
Butterworth orders and up to :data:`MAX_PEAKS` resonant peaks, all shared; the sensor noise the
learned fit's times one common factor. Whatever the sensors cannot see is split as declared
(``|c|^2`` cancels in the regression of the unseen loads on the seen combinations), and the
level and shape the records do tell are theirs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from offline._deps import need
from offline.load.corner import lowest_corner
from offline.load.model import LoadModel
from offline.load.welch import peak_of_ratio
from offline.load.whittle import LN10

#: a load combination is seen in a bin when its whitened singular value reaches this (its
#: response at the declared size equals the noise)
SEEN_SNR = 1.0
#: the split is weakly identified when fewer combinations than loads are seen in more than
#: this share of the records' bins
WEAK_SHARE = 0.5
MAX_PEAKS = 3
#: prior std of the shape's parameters (level, corner shift, span, tilt, noise factor):
#: the learned fit's (offline.load.whittle.make_layout)
PRIOR_SD = np.array([LN10, np.log(3.0), np.log(3.0), 1.0, LN10])
#: of each peak's ln f, ln zeta, ln(gain - 1)
PEAK_SD = np.array([10.0, 1.5, 2.0])


def seen_combinations(W, prior: LoadModel) -> np.ndarray:
    """``(nb,)`` the number of load combinations seen in each bin of the Whittle likelihood
    ``W`` (module docstring) at the declaration's sizes and noise (``prior.noise_std``)."""
    scale = np.array([np.sqrt(fm.psd([np.sqrt(fm.band[0] * fm.band[1])])[0])
                      for fm in prior.forces])
    nrm = 1.0 / np.sqrt(np.asarray(prior.noise_std, float) ** 2 * W.dt)
    Hw = nrm[None, :, None] * W.H[W.centres] * scale[None, None, :]
    s = np.linalg.svd(Hw, compute_uv=False)
    return np.sum(s >= SEEN_SNR, axis=1)


def weak_split(W, prior: LoadModel) -> dict | None:
    """``{"seen": median number seen, "loads": nf, "share": share of bins short}`` when the
    records cannot tell the split of the loads (module docstring), else None."""
    nf = len(prior.forces)
    if nf < 2 or prior.noise_std is None:
        return None
    seen = seen_combinations(W, prior)
    share = float(np.mean(seen < nf))
    if share <= WEAK_SHARE:
        return None
    return {"seen": int(np.median(seen)), "loads": nf, "share": share}


def shaped(prior: LoadModel, x, orders, npeaks: int) -> list:
    """The declared forces times the common shape ``x`` (level, corner shift, span change,
    tilt, noise factor, then ``ln f, ln zeta, ln(gain - 1)`` per peak) with Butterworth
    ``orders`` (hp, lp)."""
    dl, dlo, dspan, dtilt = x[:4]
    pk = tuple((float(np.exp(x[5 + 3 * i])), float(np.exp(x[6 + 3 * i])),
                float(1.0 + np.exp(x[7 + 3 * i]))) for i in range(npeaks))
    out = []
    for fm in prior.forces:
        lo, hi = fm.band
        lo2 = lo * np.exp(dlo)
        out.append(replace(fm, rms=float(fm.rms * np.exp(dl)),
                           band=(float(lo2), float(lo2 * hi / lo * np.exp(dspan))),
                           tilt=float(np.clip(fm.tilt + dtilt, -3.0, 3.0)),
                           order=int(orders[1]), hp_order=int(orders[0]),
                           lp_order=int(orders[1]), peaks=tuple(fm.peaks) + pk))
    return out


def _model(prior, x, orders, npeaks, noise) -> LoadModel:
    g = float(np.exp(x[0]))
    return LoadModel(forces=shaped(prior, x, orders, npeaks), corr=prior.corr,
                     noise_std=np.asarray(noise) * np.exp(x[4]), source="record",
                     components=[replace(c, v=tuple(g * v for v in c.v))
                                 for c in prior.components])


class _Objective:
    """``-log L`` of the shape ``x`` (Whittle, :mod:`offline.load.whittle`) plus its prior
    penalty ``1/2 sum ((x - x0) / sd)^2`` (the declaration: no change; a peak: its start)."""

    def __init__(self, W, prior, noise, orders, x0):
        self.W, self.prior, self.noise, self.orders = W, prior, noise, tuple(orders)
        self.x0 = np.asarray(x0, float)
        self.npeaks = (self.x0.size - 5) // 3
        self.sd = np.concatenate([PRIOR_SD] + [PEAK_SD] * self.npeaks)

    def model(self, x) -> LoadModel:
        return _model(self.prior, x, self.orders, self.npeaks, self.noise)

    def __call__(self, x) -> float:
        m = self.model(x)
        corr = m.corr if m.correlated else np.eye(len(m.forces))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            v = self.W.nll_of(self.W.expected(m.forces, m.noise_std, corr, m.components))
        z = (np.asarray(x) - self.x0) / self.sd
        return float(v + 0.5 * z @ z) if np.isfinite(v) else 1e300

    def bounds(self, f_min: float, f_top: float) -> list:
        """Each force's band inside ``[min(f_min, declared corner), f_top]`` and at least 1.2
        wide, the tilt's change within +/-2, the peaks within the band of the records."""
        los = [fm.band[0] for fm in self.prior.forces]
        spans = [fm.band[1] / fm.band[0] for fm in self.prior.forces]
        f_low = lowest_corner(f_min, min(los))  # the declared corner reachable (corner.py)
        b = [(-6 * LN10, 3 * LN10), (np.log(f_low / min(los)), np.log(0.5 * f_top / max(los))),
             (np.log(1.2 / min(spans)), np.log(f_top / f_low / max(spans))), (-2.0, 2.0),
             (-LN10, LN10)]
        for _ in range(self.npeaks):
            b += [(np.log(f_min), np.log(f_top)), (np.log(0.002), np.log(0.3)),
                  (np.log(0.05), np.log(1e3))]
        return b


def _minimise(obj: _Objective, x, f_min, f_top, maxiter: int):
    opt = need("scipy.optimize")
    b = obj.bounds(f_min, f_top)
    x = np.clip(x, [lo + 1e-9 for lo, _ in b], [hi - 1e-9 for _, hi in b])
    r = opt.minimize(obj, x, method="L-BFGS-B", bounds=b, options={"maxiter": maxiter})
    return np.asarray(r.x), float(obj(r.x))


def _peak_start(W, m: LoadModel):
    """Where the records' force spectrum (E-step, the posterior second moment ``M``) most
    exceeds the model's ``S`` along any direction (largest eigenvalue of ``S^-1 M``, over
    3 bins): ``(ln f, ln zeta, ln(gain - 1))`` or None when nowhere by 2x."""
    corr = m.corr if m.correlated else np.eye(len(m.forces))
    f, S, M = W.posterior_force_spectra(m.forces, m.noise_std, corr, m.components)
    Li = np.linalg.inv(np.linalg.cholesky(S))
    X = Li @ M @ np.conj(np.transpose(Li, (0, 2, 1)))
    peak = peak_of_ratio(f, np.linalg.eigvalsh(0.5 * (X + np.conj(np.transpose(X, (0, 2, 1)))))
                         [:, -1])
    if peak is None:
        return None
    f0, zeta, r = peak
    return np.array([np.log(f0), np.log(zeta), np.log(max(np.sqrt(r) - 1.0, 0.05))])


def declared_split_fit(fit, prior: LoadModel, say=None) -> LoadModel | None:
    """The load model of the declaration's split times the common shape that maximises the
    records' Whittle likelihood (module docstring), the noise ``fit`` learned times a common
    factor; None when a declared force is not a band-pass model (no shape to share).

    Steps: the level by a scan, level / corners / span / tilt / noise factor jointly; the
    Butterworth orders (the low-pass, then the high-pass one; kept when ``-log L`` drops);
    peaks one at a time where the records' force spectrum exceeds the model's, each kept when
    it raises the likelihood by more than its cost (BIC, 3 parameters)."""
    if any(fm.kind != "bandpass" for fm in prior.forces):
        return None
    say = say or (lambda s: None)
    W = fit.info["whittle"]
    f_min, f_top = (float(x) for x in fit.info["band_hz"])
    f_top = max(f_top, 0.45 / W.dt)
    noise = np.asarray(fit.model.noise_std, float)
    orders = prior.forces[0].orders
    say("the declaration's split, its level and shape learned")
    obj = _Objective(W, prior, noise, orders, np.zeros(5))
    grid = np.arange(-6.0, 3.01, 0.25) * LN10
    x = np.zeros(5)
    x[0] = grid[int(np.argmin([obj(np.r_[g, x[1:]]) for g in grid]))]
    x, v = _minimise(obj, x, f_min, f_top, 60)
    for side, opts in ((1, (1, 2, 4, 8)), (0, (1, 2, 4))):
        for o in opts:
            trial = list(obj.orders)
            trial[side] = o
            if tuple(trial) == obj.orders:
                continue
            ob = _Objective(W, prior, noise, trial, obj.x0)
            xt, vt = _minimise(ob, x, f_min, f_top, 30)
            if vt < v:
                obj, x, v = ob, xt, vt
    bic = 0.5 * 3 * np.log(W.nb * W.K_eff)
    for _ in range(MAX_PEAKS):
        start = _peak_start(W, obj.model(x))
        if start is None:
            break
        ob = _Objective(W, prior, noise, obj.orders, np.r_[obj.x0, start])
        xt, vt = _minimise(ob, np.r_[x, start], f_min, f_top, 60)
        if not vt < v - bic:
            break
        obj, x, v = ob, xt, vt
    m = obj.model(x)
    m.info = {"declared_split": True, "level": float(np.exp(x[0])),
              "noise_factor": float(np.exp(x[4])), "nll": v}
    return m
