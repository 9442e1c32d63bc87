"""The bundle's own load model as a streaming force history: ``[simulate] load = "model"``
(the default of a bench run, ``vsense-edge run --simulate``).

Every bundle ``vsense-offline build`` writes carries the load model it was built for in
``meta["load_model"]`` (learned with ``build --record``, else the model file's declaration;
the same one ``vsense-offline limit --bundle`` uses): one shaping filter per force (a
band-pass Butterworth cascade with a tilt and resonant peaks, or a random walk), the
correlation ``rho`` of their driving noises and the source components. Its two-sided force
PSD matrix [unit^2/Hz] is::

    S_ff(f) = D(f) rho D(f) + sum_c |h_c(f)|^2 v_c v_c^T,   D = diag(sqrt(qc_j) |H_j(f)|)

with ``qc_j`` such that the force's variance ``integral S_jj df`` is ``rms_j^2`` (computed
here in NumPy on a logarithmic grid: the edge has no scipy). The history is white noise
``w`` (unit variance, seeded) through the FIR filter ``h`` whose frequency response is the
PSD square root ``H_k = (S(f_k) / dt)^(1/2)`` (``S`` real symmetric: ``f = h * w`` then has
the PSD ``H H^T dt = S``), run block by block (overlap-save, blocks of the FIR's length), so
the load is stationary from the first sample and never repeats.
"""

from __future__ import annotations

import numpy as np

#: FIR length bounds [samples]: the frequency step must resolve the narrowest feature
FIR_MIN, FIR_MAX = 256, 2 ** 16
#: frequency steps across the narrowest feature of the spectrum (band edge, peak, component)
STEPS_PER_FEATURE = 8


def bundle_load_meta(bundle) -> dict | None:
    """The load model of a bundle (``meta["load_model"]``, as ``build`` writes it), or None
    for a bundle without one (not made by ``vsense-offline build``)."""
    lm = bundle.meta.get("load_model") if isinstance(bundle.meta, dict) else None
    if not isinstance(lm, dict) or not lm.get("forces"):
        return None
    return lm


def shape(fm: dict, f: np.ndarray) -> np.ndarray:
    """``|H(j 2 pi f)|^2`` of one force model (``ForceModel.as_dict`` form), up to a constant
    (offline.forcing.force_model: Butterworth high-pass and low-pass, tilt, peaks)."""
    f = np.abs(np.asarray(f, dtype=float))
    if fm.get("kind", "bandpass") == "randomwalk":
        with np.errstate(divide="ignore"):
            return 1.0 / (2 * np.pi * f) ** 2
    lo, hi = (float(x) for x in fm["band"])
    n = int(fm.get("order", 2))
    hp = int(fm.get("hp_order") or n)
    lp = int(fm.get("lp_order") or n)
    # Butterworth: |H_hp|^2 = (f/lo)^2n / (1 + (f/lo)^2n), |H_lp|^2 = 1 / (1 + (f/hi)^2n)
    x = (f / lo) ** (2 * hp)
    g = x / (1.0 + x) / (1.0 + (f / hi) ** (2 * lp))
    tilt = float(fm.get("tilt", 0.0))
    if tilt:  # a pole-zero pair every half decade, |(s + b) / (s + a)|^2
        w, w_lo, w_hi = 2 * np.pi * f, 2 * np.pi * lo, 2 * np.pi * hi
        m = max(int(np.ceil(2 * np.log10(w_hi / w_lo))), 1)
        poles = w_lo * 10 ** (0.5 * np.arange(m))
        r = 10 ** (0.5 * abs(tilt) / 2)
        a, b = (poles, poles * r) if tilt > 0 else (poles * r, poles)
        for ai, bi in zip(a, b):
            g = g * (w ** 2 + bi ** 2) / (w ** 2 + ai ** 2)
    for f0, zeta, gain in fm.get("peaks", ()):
        # (s^2 + 2 zeta gain w0 s + w0^2) / (s^2 + 2 zeta w0 s + w0^2), s = j w
        re = f0 ** 2 - f ** 2
        g = g * (re ** 2 + (2 * zeta * gain * f0 * f) ** 2) / (re ** 2 + (2 * zeta * f0 * f) ** 2)
    return g


def force_psd(fm: dict, f: np.ndarray) -> np.ndarray:
    """Two-sided PSD [unit^2/Hz] of one force model at ``f``: ``qc |H|^2``, ``qc`` such that
    ``integral_-inf^inf qc |H|^2 df = rms^2`` (a random walk: its band's level at the band's
    geometric centre, ``S0 = rms^2 / (2 (f_hi - f_lo))``, as offline)."""
    rms = float(fm["rms"])
    lo, hi = (float(x) for x in fm["band"])
    if fm.get("kind", "bandpass") == "randomwalk":
        fc2 = lo * hi  # S(f) = S0 fc^2 / f^2 equals S0 at fc
        return rms ** 2 / (2 * (hi - lo)) * fc2 * shape(fm, f) * (2 * np.pi) ** 2
    # integral over f > 0 on a log grid (d f = f d ln f), times 2 for the two sides
    grid = np.geomspace(lo * 1e-4, hi * 1e4, 40_000)
    g = shape(fm, grid) * grid
    area = 2.0 * float(np.sum(0.5 * (g[1:] + g[:-1]) * np.diff(np.log(grid))))
    return rms ** 2 / area * shape(fm, f)


def load_psd(lm: dict, f: np.ndarray) -> np.ndarray:
    """Two-sided force PSD matrix ``(nfreq, nf, nf)`` of a load model (module docstring)."""
    f = np.asarray(f, dtype=float)
    d = np.sqrt(np.column_stack([force_psd(fm, f) for fm in lm["forces"]]))
    nf = d.shape[1]
    corr = np.asarray(lm.get("corr") if lm.get("corr") is not None else np.eye(nf), float)
    S = d[:, :, None] * corr[None] * d[:, None, :]
    for c in lm.get("components") or ():
        f0, z, v = float(c["f0"]), float(c["zeta"]), np.asarray(c["v"], dtype=float)
        h2 = np.abs(f0 ** 2 / (f0 ** 2 - f ** 2 + 2j * z * f0 * f)) ** 2
        S = S + h2[:, None, None] * np.outer(v, v)[None]
    return S


def fir_length(lm: dict, dt: float) -> int:
    """FIR length: a power of two whose frequency step ``1 / (N dt)`` puts
    :data:`STEPS_PER_FEATURE` steps across the narrowest feature (a band's low edge, a
    peak's or a component's half-power width ``2 zeta f``), within FIR_MIN .. FIR_MAX."""
    widths = []
    for fm in lm["forces"]:
        widths.append(float(fm["band"][0]))
        widths += [2 * float(z) * float(f0) for f0, z, _ in fm.get("peaks", ())]
    widths += [2 * float(c["zeta"]) * float(c["f0"]) for c in lm.get("components") or ()]
    df = max(min(widths), 1e-6) / STEPS_PER_FEATURE
    n = 2 ** int(np.ceil(np.log2(1.0 / (df * dt))))
    return int(np.clip(n, FIR_MIN, FIR_MAX))


def psd_sqrt(S: np.ndarray) -> np.ndarray:
    """The symmetric square root ``V diag(sqrt(lambda)) V^T`` of each (real symmetric,
    positive semi-definite) matrix of ``S`` (nk, nf, nf): continuous in the frequency."""
    lam, V = np.linalg.eigh(S)
    return np.einsum("kij,kj,klj->kil", V, np.sqrt(np.clip(lam, 0.0, None)), V)


class ModelLoad:
    """A load model's forces, block by block (module docstring).

    lm : the load model (``meta["load_model"]``); dt : sample interval [s];
    scale : factor on every force (1: the bundle's load); seed : of the white noise
    """

    def __init__(self, lm: dict, dt: float, scale: float = 1.0, seed: int = 0):
        self.nf = len(lm["forces"])
        self.N = fir_length(lm, dt)
        N = self.N
        fk = np.fft.rfftfreq(N, dt)
        S = np.zeros((fk.size, self.nf, self.nf))
        S[1:] = load_psd(lm, fk[1:])  # DC left out: forces have zero mean
        Hk = psd_sqrt(S / dt) * float(scale)
        # h: zero-phase FIR (real, even), made causal by N/2 samples (its delay is irrelevant)
        h = np.roll(np.fft.irfft(Hk, N, axis=0), N // 2, axis=0)
        self.Hf = np.fft.rfft(h, 2 * N, axis=0)  # (N + 1, nf, nf): overlap-save on 2N
        self.rng = np.random.default_rng(seed)
        self.w_prev = self.rng.standard_normal((N, self.nf))
        self.buf = np.zeros((0, self.nf))

    def _block(self) -> np.ndarray:
        """The next N samples: the last N outputs of (w_prev, w_new) convolved with h."""
        w_new = self.rng.standard_normal((self.N, self.nf))
        X = np.fft.rfft(np.vstack([self.w_prev, w_new]), axis=0)
        y = np.fft.irfft(np.einsum("kij,kj->ki", self.Hf, X), 2 * self.N, axis=0)
        self.w_prev = w_new
        return y[self.N:]

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` samples ``(n, nf)`` of the forces."""
        while self.buf.shape[0] < n:
            self.buf = np.vstack([self.buf, self._block()])
        out, self.buf = self.buf[:n], self.buf[n:]
        return out
