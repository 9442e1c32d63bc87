"""Design of the joint input-state fixed-lag Kalman smoother (offline; scipy allowed).

The reduced model in modal coordinates, each force the output of a stochastic shaping filter
driven by white noise, discretised exactly (Van Loan), and the steady-state gains from the
discrete algebraic Riccati equation. The edge runs the fixed linear recursion of
:mod:`edge.estimator.smoother` with these gains; docs/estimator.md has the derivation.

Continuous model (per force j a shaping filter ``xi_j' = Af_j xi_j + Bf_j w_j``,
``f_j = Cf_j xi_j``, ``E[w_j(t) w_j(s)] = qc_j delta(t - s)``)::

    q''  = -W2 q - Ct q' + Phi^T B Cf xi  (+ model-error noise on q')
    xi'  = Af xi + Bf w
    y    = H x + v,   E[v v^T] = R = diag(1 / channel_weight)

State ``x = [q_1, qd_1, ..., q_n, qd_n, xi]`` (the edge kernel's layout: 2x2 modal blocks,
then the force-model states; the modes couple to the force states only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.bundle import KINDS, Bundle
from edge.estimator.operator import EstimatorError, modal_basis
from offline._deps import need

FORCE_MODELS = ("bandpass", "randomwalk")


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
        if int(self.order) < 1 or int(self.order) > 4:
            raise ValueError(f"{where}: force_order must be 1..4, got {self.order}")

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
        Af, Bf, Cf, Df = signal.zpk2ss(np.r_[zh, zl], np.r_[ph, pl], kh * kl)
        if np.any(np.abs(Df) > 0):
            raise EstimatorError("force shaping filter must be strictly proper")
        # the companion form is badly scaled (cond 1e18 at order 4): balance it
        Af, (sc, _) = linalg.matrix_balance(Af, permute=False, separate=True)
        Bf, Cf = Bf / sc[:, None], Cf * sc[None, :]
        # variance of f for unit white intensity: Lyapunov  Af X + X Af^T + Bf Bf^T = 0
        X = linalg.solve_continuous_lyapunov(Af, -Bf @ Bf.T)
        var1 = float((Cf @ X @ Cf.T)[0, 0])
        return Af, Bf, Cf, self.rms ** 2 / var1


def van_loan(Ac, Qc, dt):
    """Exact discretisation of ``x' = Ac x + w``, ``E[w w^T] = Qc delta``:
    ``Ad = exp(Ac dt)``, ``Qd = int_0^dt exp(Ac s) Qc exp(Ac^T s) ds`` (Van Loan 1978).

    Van Loan's block matrix contains ``exp(-Ac tau)``, which overflows for the stiff, heavily
    damped high modes of a reduced model; it is therefore evaluated on a sub-step
    ``tau = dt / 2^m`` with ``|Ac| tau <= 1/2`` and doubled m times:
    ``Qd(2 tau) = Qd(tau) + Ad(tau) Qd(tau) Ad(tau)^T``, ``Ad(2 tau) = Ad(tau)^2``.
    """
    linalg = need("scipy.linalg")
    m = Ac.shape[0]
    nrm = float(np.max(np.sum(np.abs(Ac), axis=1))) * dt
    steps = max(0, int(np.ceil(np.log2(max(nrm / 0.5, 1.0)))))
    tau = dt / 2.0 ** steps
    Fv = np.zeros((2 * m, 2 * m))
    Fv[:m, :m] = -Ac
    Fv[:m, m:] = Qc
    Fv[m:, m:] = Ac.T
    Ev = linalg.expm(Fv * tau)
    Ad = Ev[m:, m:].T
    Qd = Ad @ Ev[:m, m:]
    for _ in range(steps):
        # Qd(2 tau) = Qd(tau) + Ad(tau) Qd(tau) Ad(tau)^T
        Qd = Qd + Ad @ Qd @ Ad.T
        Ad = Ad @ Ad
    return Ad, 0.5 * (Qd + Qd.T)


@dataclass
class SmootherDesign:
    """Everything the edge needs (stored in the bundle as ``kf_*``) plus analysis values."""

    A: np.ndarray       # (ns, ns) one step, x_{k+1} = A x_k + w
    H: np.ndarray       # (nch, ns)
    K: np.ndarray       # (ns, nch) filter gain, x_k|k = x_k|k-1 + K e_k
    Cq: np.ndarray      # (nq, ns) forces then outputs
    G: np.ndarray       # (L+1, nq, nch) smoother gains; G[0] = Cq K
    Sinv: np.ndarray    # (nch, nch) inverse innovation covariance
    std: np.ndarray     # (nq,) smoothed standard deviation
    std_filtered: np.ndarray  # (nq,) filtered (lag 0) standard deviation
    Q: np.ndarray
    R: np.ndarray
    P: np.ndarray       # a-priori steady-state covariance
    n_modes: int
    n_force_states: int
    proportional: bool
    lag: int
    spectral_radius: float


def _rows(Phi, w2, Ct, PhiB, Cf, items, ns):
    """Rows of H (channels) or of the outputs over the state (see module docstring)."""
    n = Phi.shape[0]
    R = np.zeros((len(items), ns))
    for i, it in enumerate(items):
        if hasattr(it, "row"):
            r = np.asarray(it.row, dtype=float) @ Phi
        else:
            r = Phi[it.dof].copy()
        k = KINDS.index(it.kind)
        if k == 0:
            R[i, 0:2 * n:2] = r
        elif k == 1:
            R[i, 1:2 * n:2] = r
        else:  # a = Phi (PhiB Cf xi - Ct qd - W2 q)
            R[i, 0:2 * n:2] = -r * w2
            R[i, 1:2 * n:2] = -r @ Ct
            R[i, 2 * n:] = r @ PhiB @ Cf
    return R


def design_smoother(bundle: Bundle, force_models, lag: int,
                    model_error: float = 0.0) -> SmootherDesign:
    """Steady-state joint input-state fixed-lag smoother of ``bundle``'s reduced model.

    Parameters
    ----------
    bundle : Bundle        M, C, K, dt, channels (weight = 1 / noise variance), forces, outputs
    force_models : list of ForceModel, one per force
    lag : int              smoothing lag L [samples] (delay of the estimates)
    model_error : float    white modal-load noise on every mode at ``model_error^2`` times
                           the forces' band level (process noise for model error; 0 = none)
    """
    linalg = need("scipy.linalg")
    if lag < 0:
        raise ValueError(f"smoother lag must be >= 0, got {lag}")
    if len(force_models) != len(bundle.forces):
        raise ValueError(f"{len(force_models)} force models for {len(bundle.forces)} forces")
    n = bundle.n
    nf = len(bundle.forces)
    w2, Phi = modal_basis(bundle.M, bundle.K)
    if np.min(w2) <= 1e-9 * max(np.max(w2), 1e-300):
        raise EstimatorError("the smoother needs a grounded model (rigid-body modes found); "
                             "add supports or ground springs")
    Ct = Phi.T @ bundle.C @ Phi
    Ct = 0.5 * (Ct + Ct.T)
    off = Ct - np.diag(np.diag(Ct))
    proportional = float(np.max(np.abs(off))) <= 1e-9 * max(float(np.max(np.abs(Ct))), 1e-300)
    if proportional:
        Ct = np.diag(np.diag(Ct))
    B = np.zeros((n, nf))
    for j, f in enumerate(bundle.forces):
        B[f.dof, j] = 1.0
    PhiB = Phi.T @ B
    # force-model states, block diagonal over the forces
    parts = [fm.realise() for fm in force_models]
    nfs = sum(p[0].shape[0] for p in parts)
    Af = np.zeros((nfs, nfs))
    Bf = np.zeros((nfs, nf))
    Cf = np.zeros((nf, nfs))
    qc = np.zeros(nf)
    o = 0
    for j, (a, b, c, q) in enumerate(parts):
        m = a.shape[0]
        Af[o:o + m, o:o + m] = a
        Bf[o:o + m, j] = b[:, 0]
        Cf[j, o:o + m] = c[0]
        qc[j] = q
        o += m
    ns = 2 * n + nfs
    # continuous system in the kernel's layout [q_1, qd_1, ..., xi]
    Ac = np.zeros((ns, ns))
    for i in range(n):
        Ac[2 * i, 2 * i + 1] = 1.0
        Ac[2 * i + 1, 2 * i] = -w2[i]
    Ac[1:2 * n:2, 1:2 * n:2] = -Ct
    Ac[1:2 * n:2, 2 * n:] = PhiB @ Cf
    Ac[2 * n:, 2 * n:] = Af
    Qc = np.zeros((ns, ns))
    Qc[2 * n:, 2 * n:] = Bf @ np.diag(qc) @ Bf.T
    if model_error > 0:
        # q' noise: eps^2 x (modal load level of the forces)        (model error)
        S0 = np.array([fm.level() for fm in force_models])
        Qc[1:2 * n:2, 1:2 * n:2] += np.diag(model_error ** 2 * (PhiB ** 2 @ S0))
    A, Q = van_loan(Ac, Qc, bundle.dt)
    if proportional:  # exact zeros outside the structure (expm round-off)
        mask = np.zeros((ns, ns), bool)
        for i in range(n):
            mask[2 * i:2 * i + 2, 2 * i:2 * i + 2] = True
        mask[:, 2 * n:] = True
        A = np.where(mask, A, 0.0)
    H = _rows(Phi, w2, Ct, PhiB, Cf, bundle.channels, ns)
    Cz = _rows(Phi, w2, Ct, PhiB, Cf, bundle.outputs, ns)
    Cq = np.vstack([np.hstack([np.zeros((nf, 2 * n)), Cf]), Cz])
    R = np.diag(1.0 / np.array([c.weight for c in bundle.channels]))
    # state scaling for the Riccati solve: stationary std of each state (open loop)
    P = _dare(A, H, Q, R, linalg)
    # S = H P H^T + R;  K = P H^T S^-1                      (filter gain)
    S = H @ P @ H.T + R
    Sinv = np.linalg.inv(0.5 * (S + S.T))
    K = P @ H.T @ Sinv
    # Abar = A (I - K H): one-step prediction error dynamics
    Abar = A - A @ K @ H
    rho = float(np.max(np.abs(np.linalg.eigvals(Abar))))
    if not rho < 1.0:
        raise EstimatorError(f"the Kalman predictor is not stable (spectral radius {rho:.6f}); "
                             "the forces are not observable from the sensors")
    nq = Cq.shape[0]
    G = np.zeros((lag + 1, nq, len(bundle.channels)))
    # x_{k-L|k} = x_{k-L|k-L} + sum_{j=1..L} P (Abar^T)^j H^T S^-1 e_{k-L+j}
    Pj = P.copy()                # P (Abar^T)^j
    HtSi = H.T @ Sinv
    Ps = P.copy()                # smoothed covariance P_{k-L|k}
    for j in range(lag + 1):
        Gx = Pj @ HtSi
        G[j] = Cq @ Gx
        Ps -= Gx @ H @ Pj.T      # - P (Abar^T)^j H^T S^-1 H Abar^j P
        if j == 0:
            Pf = Ps.copy()
        Pj = Pj @ Abar.T
    std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Cq, Ps, Cq), 0.0, None))
    stdf = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Cq, Pf, Cq), 0.0, None))
    return SmootherDesign(A=A, H=H, K=K, Cq=Cq, G=G, Sinv=Sinv, std=std, std_filtered=stdf,
                          Q=Q, R=R, P=P, n_modes=n, n_force_states=nfs,
                          proportional=bool(proportional), lag=int(lag), spectral_radius=rho)


def _dare(A, H, Q, R, linalg):
    """A-priori steady-state covariance: P = A P A^T - A P H^T (H P H^T + R)^-1 H P A^T + Q.

    Solved on a diagonally scaled state (x = D x~, D = sqrt(diag(X)), X the open-loop
    stationary covariance, X = A X A^T + Q) so that modal and force states of very different
    sizes are balanced; a random-walk force (X unbounded) is scaled by its one-step noise.
    """
    d = np.sqrt(np.clip(np.diag(Q), 0.0, None))
    try:
        if np.max(np.abs(np.linalg.eigvals(A))) < 1.0 - 1e-12:
            X = linalg.solve_discrete_lyapunov(A, Q)
            d = np.sqrt(np.clip(np.diag(X), 0.0, None))
    except (np.linalg.LinAlgError, ValueError):
        pass
    top = float(np.max(d)) if d.size and np.max(d) > 0 else 1.0
    d = np.maximum(d, 1e-12 * top)
    Di = 1.0 / d
    At = Di[:, None] * A * d[None, :]
    Ht = H * d[None, :]
    Qt = Di[:, None] * Q * Di[None, :]
    try:
        Pt = linalg.solve_discrete_are(At.T, Ht.T, Qt, R)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise EstimatorError(f"the smoother's Riccati equation has no stabilising solution "
                             f"({exc}); are the forces observable from the sensors?") from None
    P = d[:, None] * Pt * d[None, :]
    return 0.5 * (P + P.T)


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
    from edge.estimator.smoother import _norm_sf

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
        h = signal.lfilter(b, a, np.r_[1.0, np.zeros(n - 1)])
        gain[i] = float(h @ h)
        r = np.fft.irfft(np.abs(np.fft.rfft(h, 2 * n)) ** 2)[:n]  # r(k), k = 0..n-1
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


def attach_smoother(bundle: Bundle, design: SmootherDesign, force_models, model_error: float,
                    nis_window_s: float = 8.0, nis_false_alarm: float = 0.01,
                    bands=None, nis_tolerance: float = 2.0) -> Bundle:
    """A copy of ``bundle`` that runs the smoother (``kf_*`` arrays, ``meta["estimator"]``).

    ``bands``: model-check bands [Hz] (default :func:`check_bands`). The broadband NIS flags
    above ``max(chi-square quantile, nis_tolerance * dof)``: the innovation level also follows
    the load's level, which the force model only states roughly."""
    from edge.estimator.smoother import nis_threshold

    W = max(int(round(nis_window_s / bundle.dt)), 1)
    nch = len(bundle.channels)
    dof = W * nch
    bands = check_bands(bundle, force_models) if bands is None else list(bands)
    ba, gain, thr = band_filters(bands, bundle.rate, W, nch, nis_false_alarm)
    # whitening: S^-1 = Lc Lc^T, eps = Lc^T e  ->  eps^T eps = e^T S^-1 e
    Lc = np.linalg.cholesky(0.5 * (design.Sinv + design.Sinv.T))
    kf = {"A": design.A, "H": design.H, "K": design.K, "Cq": design.Cq, "G": design.G,
          "Sinv": design.Sinv, "std": design.std,
          "nis_window": np.array(W, dtype=np.int64),
          "nis_threshold": np.array(max(nis_threshold(dof, nis_false_alarm),
                                        nis_tolerance * dof)),
          "Wt": np.ascontiguousarray(Lc.T), "band_ba": ba, "band_gain": gain,
          "band_threshold": thr, "band_hz": np.array(bands, dtype=float).reshape(-1, 2)}
    meta = dict(bundle.meta)
    meta["estimator"] = {
        "method": "smoother", "lag": design.lag, "n_force_states": design.n_force_states,
        "proportional": design.proportional, "model_error": float(model_error),
        "force_models": [{"kind": fm.kind, "band": list(map(float, fm.band)),
                          "rms": float(fm.rms), "order": int(fm.order)} for fm in force_models],
        "spectral_radius": design.spectral_radius,
        "check_window_s": W * bundle.dt, "check_false_alarm": float(nis_false_alarm),
        "check_bands_hz": [list(map(float, b)) for b in bands],
        "std_filtered": design.std_filtered.tolist(), "std": design.std.tolist()}
    return bundle.replace(kf=kf, window=design.lag + 1, meta=meta)


# ------------------------------------------------------------------ model file
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
    order = t.get("order", "int", 4, lo=1, hi=4)
    t.done()
    return {"kind": kind, "band": band, "rms": rms, "order": order}


def smoother_from_spec(bundle: Bundle, spec, est_spec) -> Bundle:
    """The smoother of a model file: ``[estimator]`` method/lag/model_error/check_* and each
    force's ``model`` (band and RMS default to the ``[calibration]`` random load's, else
    1 Hz .. 0.4 rate and 1)."""
    cal = spec.calibration
    dflt_band = (1.0, 0.4 * bundle.rate)
    dflt_rms = 1.0
    if cal is not None and cal.load.type == "random":
        dflt_band, dflt_rms = tuple(cal.load.band), float(cal.load.rms)
    models = []
    for f in spec.forces:
        m = f.model or {}
        fm = ForceModel(kind=m.get("kind", "bandpass"),
                        band=tuple(m.get("band") or dflt_band),
                        rms=float(m.get("rms") or dflt_rms), order=int(m.get("order", 4)))
        fm.check(f.where or f"[[forces]] {f.name}")
        models.append(fm)
    lag = est_spec.lag if est_spec.lag is not None else int(round(0.02 * bundle.rate))
    try:
        design = design_smoother(bundle, models, lag, est_spec.model_error)
    except EstimatorError as exc:
        raise EstimatorError(f"{spec.where('[estimator]')}: {exc}") from None
    return attach_smoother(bundle, design, models, est_spec.model_error,
                           est_spec.check_window_s, est_spec.check_false_alarm)
