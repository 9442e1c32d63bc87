"""Stochastic force models: each force the output of a shaping filter driven by white noise
(a band-pass Butterworth cascade, or a random walk). The ``[[forces]] model`` table that sets
one is parsed by :func:`offline.model.signals.parse_force_model`."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from edge.estimator.operator import EstimatorError
from offline._deps import need

FORCE_MODELS = ("bandpass", "randomwalk")
# default Butterworth order of the band-pass force model when only a band and a size are
# known: a real load's band edges are gentle (docs/load.md "Without a record": on the load
# zoo, order 2 stays within 1.25x of the limit where order 16, near the ideal band, reached
# 5.7x on an unmeasured output)
DEFAULT_ORDER = 2


@dataclass(frozen=True)
class ForceModel:
    """Stochastic model of one force: white noise through a rational shaping filter.

    kind : "bandpass" (a Butterworth high-pass at band[0] of ``hp_order`` times a Butterworth
        low-pass at band[1] of ``lp_order``, both ``order`` unless given, times a fractional
        ``tilt`` and resonant ``peaks``) or "randomwalk" (f' = w, spectrum matched to the
        band's level at its geometric centre).
    band : (f_lo, f_hi) [Hz]; rms : RMS of the force [N or N m] (stationary).
    tilt : power-spectrum slope inside the band, ``|H|^2 ~ f^-tilt`` (0 flat, 1 pink),
        realised as interlaced first-order poles and zeros every half decade.
    peaks : ((f [Hz], zeta, gain), ...) resonant sections
        ``(s^2 + 2 zeta gain w0 s + w0^2) / (s^2 + 2 zeta w0 s + w0^2)``: ``|H|`` times
        ``gain`` at ``f``, 1 far from it (a resonance of the source that drives the force).
    """

    kind: str = "bandpass"
    band: tuple = (5.0, 160.0)
    rms: float = 1.0
    order: int = 2
    hp_order: int | None = None
    lp_order: int | None = None
    tilt: float = 0.0
    peaks: tuple = ()

    @property
    def orders(self) -> tuple[int, int]:
        """(high-pass, low-pass) Butterworth orders."""
        hp = self.order if self.hp_order is None else self.hp_order
        lp = self.order if self.lp_order is None else self.lp_order
        return int(hp), int(lp)

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
        for name, o in zip(("order", "hp_order", "lp_order"),
                           (self.order, *self.orders)):
            if int(o) < 1 or int(o) > 32:
                raise ValueError(f"{where}: force {name} must be 1..32, got {o}")
        if not (np.isfinite(self.tilt) and abs(self.tilt) <= 3):
            raise ValueError(f"{where}: force tilt must be within -3..3, got {self.tilt}")
        for f, z, g in self.peaks:
            if not (f > 0 and 0 < z < 1 and g >= 1 and np.isfinite(f * z * g)):
                raise ValueError(f"{where}: force peak (f, zeta, gain) needs f > 0, "
                                 f"0 < zeta < 1, gain >= 1, got {(f, z, g)}")

    def as_dict(self) -> dict:
        """JSON form (bundle meta, fitted load summaries); :meth:`from_dict` reads it."""
        hp, lp = self.orders
        return {"kind": self.kind, "band": [float(x) for x in self.band],
                "rms": float(self.rms), "order": int(self.order), "hp_order": hp,
                "lp_order": lp, "tilt": float(self.tilt),
                "peaks": [[float(f), float(z), float(g)] for f, z, g in self.peaks]}

    @classmethod
    def from_dict(cls, d: dict) -> "ForceModel":
        return cls(kind=d.get("kind", "bandpass"), band=tuple(d["band"]), rms=float(d["rms"]),
                   order=int(d.get("order", 2)), hp_order=d.get("hp_order"),
                   lp_order=d.get("lp_order"), tilt=float(d.get("tilt", 0.0)),
                   peaks=tuple(tuple(map(float, p)) for p in d.get("peaks", ())))

    def level(self) -> float:
        """Two-sided PSD [unit^2 s/rad] of a flat band of this RMS: var = 2 S0 (w_hi-w_lo)/2pi."""
        w_lo, w_hi = 2 * np.pi * np.asarray(self.band, dtype=float)
        return np.pi * self.rms ** 2 / (w_hi - w_lo)

    def sections(self) -> np.ndarray:
        """Analog second-order sections ``(nsec, 6)`` of the shaping filter (``bandpass``),
        each of unit gain at the band's geometric centre (the overall gain is set by qc)."""
        signal = need("scipy.signal")
        w_lo, w_hi = 2 * np.pi * np.asarray(self.band, dtype=float)
        hp, lp = self.orders
        zh, ph, _ = signal.butter(hp, w_lo, "highpass", analog=True, output="zpk")
        zl, pl, _ = signal.butter(lp, w_hi, "lowpass", analog=True, output="zpk")
        z, p = list(np.r_[zh, zl]), list(np.r_[ph, pl])
        if self.tilt:
            # |H|^2 ~ f^-tilt: a pole-zero pair every half decade, the zero (tilt / 2) half
            # decades above its pole (a rising spectrum, tilt < 0: the zero first)
            m = max(int(np.ceil(2 * np.log10(w_hi / w_lo))), 1)
            poles = w_lo * 10 ** (0.5 * np.arange(m))
            r = 10 ** (0.5 * abs(self.tilt) / 2)
            a, b = (poles, poles * r) if self.tilt > 0 else (poles * r, poles)
            p += list(-a)
            z += list(-b)
        sos = signal.zpk2sos(np.array(z), np.array(p), 1.0, analog=True)
        for f0, zeta, g in self.peaks:
            w0 = 2 * np.pi * f0
            sos = np.vstack([sos, [1.0, 2 * zeta * g * w0, w0 ** 2, 1.0, 2 * zeta * w0,
                                   w0 ** 2]])
        s_c = 1j * np.sqrt(w_lo * w_hi)
        for sec in sos:
            sec[:3] /= abs(np.polyval(sec[:3], s_c) / np.polyval(sec[3:], s_c))
        return sos

    def shape(self, freqs, sos=None) -> np.ndarray:
        """``|H(j 2 pi f)|^2`` of the sections ``sos`` (default :meth:`sections`) at
        ``freqs`` [Hz] (qc = 1)."""
        s = 2j * np.pi * np.asarray(freqs, dtype=float)
        if self.kind == "randomwalk":
            with np.errstate(divide="ignore"):
                return 1.0 / np.abs(s) ** 2
        h = np.ones(s.shape, complex)
        for sec in (self.sections() if sos is None else sos):
            h *= np.polyval(sec[:3], s) / np.polyval(sec[3:], s)
        return np.abs(h) ** 2

    def psd(self, freqs) -> np.ndarray:
        """Two-sided power spectral density [unit^2/Hz] at ``freqs`` [Hz]: ``qc |H|^2``
        (its integral over -inf..inf is ``rms^2``)."""
        sos = None if self.kind == "randomwalk" else self.sections()  # designed once
        return self.realise(sos)[3] * self.shape(freqs, sos)

    def realise(self, sos=None):
        """Continuous ``(Af, Bf, Cf, qc)``: ``xi' = Af xi + Bf w``, ``f = Cf xi``
        (``sos``: :meth:`sections` when already at hand)."""
        if self.kind == "randomwalk":
            wc = 2 * np.pi * np.sqrt(self.band[0] * self.band[1])
            # S_f(w) = qc / w^2 equals the band level S0 at the band's geometric centre
            return np.zeros((1, 1)), np.ones((1, 1)), np.ones((1, 1)), self.level() * wc ** 2
        signal = need("scipy.signal")
        linalg = need("scipy.linalg")
        Af, Bf, Cf, Df = _cascade(self.sections() if sos is None else sos, signal)
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
