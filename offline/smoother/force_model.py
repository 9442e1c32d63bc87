"""Stochastic force models of the smoother: each force the output of a shaping filter
driven by white noise (a band-pass Butterworth cascade, or a random walk), and the
``[[forces]] model`` table that sets one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.estimator.operator import EstimatorError
from offline._deps import need

FORCE_MODELS = ("bandpass", "randomwalk")
# default Butterworth order of the band-pass force model: close to the ideal band of a
# random load (docs/smoother.md "Which force model serves": order 16 vs 4 and 8)
DEFAULT_ORDER = 16


@dataclass(frozen=True)
class ForceModel:
    """Stochastic model of one force.

    kind : "bandpass" (Butterworth high-pass at band[0] times low-pass at band[1], each of
        ``order``) or "randomwalk" (f' = w, spectrum matched to the band's level at its
        geometric centre).
    band : (f_lo, f_hi) [Hz]; rms : expected RMS of the force [N or N m].
    """

    kind: str = "bandpass"
    band: tuple = (5.0, 160.0)
    rms: float = 1.0
    order: int = 2

    def check(self, where: str) -> None:
        if self.kind not in FORCE_MODELS:
            raise ValueError(f"{where}: force_model {self.kind!r} is not one of "
                             f"{', '.join(FORCE_MODELS)}")
        lo, hi = self.band
        if not (0 < lo < hi):
            raise ValueError(f"{where}: force_band must be [f_lo, f_hi] with 0 < f_lo < f_hi "
                             f"[Hz], got {list(self.band)}")
        if not (self.rms > 0 and np.isfinite(self.rms)):
            raise ValueError(f"{where}: force_rms must be > 0, got {self.rms}")
        if int(self.order) < 1 or int(self.order) > 32:
            raise ValueError(f"{where}: force_order must be 1..32, got {self.order}")

    def level(self) -> float:
        """Two-sided PSD [unit^2 s/rad] of a flat band of this RMS: var = 2 S0 (w_hi-w_lo)/2pi."""
        w_lo, w_hi = 2 * np.pi * np.asarray(self.band, dtype=float)
        return np.pi * self.rms ** 2 / (w_hi - w_lo)

    def realise(self):
        """Continuous ``(Af, Bf, Cf, qc)``: ``xi' = Af xi + Bf w``, ``f = Cf xi``."""
        if self.kind == "randomwalk":
            wc = 2 * np.pi * np.sqrt(self.band[0] * self.band[1])
            # S_f(w) = qc / w^2 equals the band level S0 at the band's geometric centre
            return np.zeros((1, 1)), np.ones((1, 1)), np.ones((1, 1)), self.level() * wc ** 2
        signal = need("scipy.signal")
        linalg = need("scipy.linalg")
        w_lo, w_hi = 2 * np.pi * np.asarray(self.band, dtype=float)
        zh, ph, kh = signal.butter(int(self.order), w_lo, "highpass", analog=True,
                                   output="zpk")
        zl, pl, kl = signal.butter(int(self.order), w_hi, "lowpass", analog=True,
                                   output="zpk")
        sos = signal.zpk2sos(np.r_[zh, zl], np.r_[ph, pl], 1.0, analog=True)
        # each section of unit gain at the band's geometric centre (the overall gain is set
        # by qc below): no section carries w_hi^order
        s_c = 1j * np.sqrt(w_lo * w_hi)
        for sec in sos:
            sec[:3] /= abs(np.polyval(sec[:3], s_c) / np.polyval(sec[3:], s_c))
        Af, Bf, Cf, Df = _cascade(sos, signal)
        if np.any(np.abs(Df) > 0):
            raise EstimatorError("force shaping filter must be strictly proper")
        # one companion form of the whole filter is badly scaled (cond 1e18 at order 4):
        # a cascade of second-order sections, balanced
        Af, (sc, _) = linalg.matrix_balance(Af, permute=False, separate=True)
        Bf, Cf = Bf / sc[:, None], Cf * sc[None, :]
        # variance of f for unit white intensity: Lyapunov  Af X + X Af^T + Bf Bf^T = 0
        X = linalg.solve_continuous_lyapunov(Af, -Bf @ Bf.T)
        var1 = float((Cf @ X @ Cf.T)[0, 0])
        return Af, Bf, Cf, self.rms ** 2 / var1


def _cascade(sos, signal):
    """State space ``(A, B, C, D)`` of analog second-order sections in series
    (``x_i' = A_i x_i + B_i u_i``, ``u_i+1 = y_i = C_i x_i + D_i u_i``)."""
    A = np.zeros((0, 0))
    B = np.zeros((0, 1))
    C = np.zeros((1, 0))
    D = np.ones((1, 1))
    import warnings

    for sec in sos:
        with warnings.catch_warnings():  # a low-pass section's numerator [0, 0, k] is fine
            warnings.simplefilter("ignore", signal.BadCoefficients)
            a2, b2, c2, d2 = signal.tf2ss(sec[:3], sec[3:])
        m, k = A.shape[0], a2.shape[0]
        An = np.zeros((m + k, m + k))
        An[:m, :m] = A
        An[m:, :m] = b2 @ C
        An[m:, m:] = a2
        B = np.vstack([B, b2 @ D])
        C = np.hstack([d2 @ C, c2])
        D = d2 @ D
        A = An
    return A, B, C, D


def parse_force_model(d: dict, where: str) -> dict:
    """Validate a ``[[forces]] model = {kind, band, rms, order}`` table (errors name the key)."""
    from offline.model.spec import ModelFileError, Table, check

    t = Table(d, where)
    kind = t.get("kind", "str", "bandpass", choices=FORCE_MODELS)
    band = t.get("band", "list", None)
    if band is not None:
        if len(band) != 2:
            raise ModelFileError(f"{where}.band: expected [f_low, f_high] in Hz")
        band = tuple(check(x, f"{where}.band[{i}]", lo=0.0, lo_open=True)
                     for i, x in enumerate(band))
        if not band[0] < band[1]:
            raise ModelFileError(f"{where}.band: f_low must be below f_high")
    rms = t.get("rms", "num", None, lo=0.0, lo_open=True)
    order = t.get("order", "int", DEFAULT_ORDER, lo=1, hi=32)
    t.done()
    return {"kind": kind, "band": band, "rms": rms, "order": order}
