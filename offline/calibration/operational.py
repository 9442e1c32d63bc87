"""Calibration from operational records (force unknown) by the marginal likelihood of the
parameters with the force as a stochastic input.

Model: the responses of the parametric reduced model (``setup.pm``: M̂(θ), K̂(θ), Ĉ(θ)) to
forces with the load model of :mod:`offline.load` (each force white noise through its shaping
filter, correlated driving noises) plus white sensor noise. The exact likelihood of such a
record is the prediction-error decomposition of the joint input-state Kalman filter (the
force's shaping filter as states), ``-log p(y|θ) = ½ Σ_k [log det S_k + e_kᵀ S_k⁻¹ e_k]``;
for a stationary record its frequency-domain form is Whittle's (the innovations' variance
factorises the spectral matrix: ``Σ_k log det S_k -> N ∫ log det S_yy df`` by the
Szegő-Kolmogorov formula), here on Welch matrices (:mod:`offline.load.whittle`)::

    S_yy(f; θ, λ) = H(f; θ) S_ff(f; λ) H(f; θ)ᴴ + diag(s²) dt
    -log p(Ŝ | θ, λ) = K_eff Σ_k [log det E_k + tr(E_k⁻¹ Ŝ_k)],  E_k = (kernel * S_yy)(f_k)

``H(f; θ) = C_out Φ diag(1 / (ω_r² - ω² + i ω c_r)) Φᵀ B`` from the modes of the reduced model
at θ (Rayleigh damping: Φᵀ Ĉ Φ is diagonal, ``c_r = φ_rᵀ Ĉ φ_r``), times ``iω`` / ``-ω²`` for
velocity / acceleration sensors. The structure's parameters ξ = t⁻¹(θ) (prior of ``[bayes]``)
and the load model's λ (prior: the declaration, as ``build --record`` does) are fitted
jointly: maximum of the posterior by L-BFGS-B (λ's gradient analytic, ξ's by central
differences), posterior by Laplace (Fisher information of the Wishart likelihood plus the
prior precisions; the ξ block of its inverse is ξ's marginal covariance).

Multimodality: the likelihood of a lightly damped peak is a narrow valley in frequency (a
resonance a few half-power bandwidths away is not "seen"), and damage zones trade off.
Hence (1) a coarse-to-fine continuation: every start is first optimised on Welch spectra of
short segments (wide bins: the window kernel widens each model peak, the valley becomes a
wide basin), the best starts are then refined on the full-resolution spectra; (2) starts at
the prior mean, one per damage zone (that zone at ω = 0.4), the natural frequencies found by
the modal route (:mod:`offline.calibration.modal`) when it finds them, and a few seeded prior
draws. Local optima that end within a few nats of the best are reported as competing modes.

The records are conversions, not point samples (:mod:`offline.calibration.spectral_chain`):
``H`` above is each channel's through its chain, ``G_c(f) H_c(f)``, and a sensor's declared
drifting offset adds its walk's expected Welch estimate to the channel's noise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from edge.inverse import modal
from offline._deps import need
from offline.calibration.forward import damped_matrices
from offline.calibration.spectral_chain import (chain_gains, measurement_label,
                                                records_chain, through_chain)
from offline.limit.transfer import ModalModel
from offline.load.declared import declared_force_models
from offline.load.learn import learn_load
from offline.load.model import LoadModel
from offline.load.walk import walk_spectra
from offline.load.welch import cross_spectra, segment_length, window_kernel
from offline.load.whittle import Whittle, make_layout, start_theta, unpack

COARSE_SEG_S = 0.5      # segment of the coarse stage [s]
ZONE_START = 0.4        # damage of a zone's own start
NOISE_PRIOR = 0.01      # prior median of each sensor's noise: 1 % of the record's std


def reduced_modal(parts, theta, B, out_rows) -> ModalModel:
    """Modes of the parametric reduced model at θ as a :class:`ModalModel` (no residual:
    the reduced model is complete), so :meth:`ModalModel.transfer` gives H(f; θ).

    parts : edge.inverse.Parts;  theta : (p,);  B : (n, nf);  out_rows : (nch, n)
    """
    M, C, K, *_ = damped_matrices(parts, theta)
    w2, Phi = modal(M, K)
    # c_r = φ_rᵀ Ĉ φ_r  (exactly modal for Rayleigh damping)
    c = np.einsum("ir,ij,jr->r", Phi, C, Phi)
    return ModalModel(lam=np.maximum(w2, 0.0), c=c, Phi_in=B.T @ Phi, Phi_out=out_rows @ Phi,
                      R=np.zeros((out_rows.shape[0], B.shape[1])))


def welch_grid(Ys, dt: float, seg_s=None, chain=None):
    """The Whittle grid of :func:`offline.load.learn_load` (same bins, kernel and K_eff):
    ``((f_fine, S_hat, kernel, over, K_eff), band [Hz], segments, N, walk)``, ``walk`` the
    drifting offsets' expected Welch estimates at the bins (None: no drift) of ``chain``."""
    N = segment_length(min(Y.shape[0] for Y in Ys), dt, seg_s)
    freqs, S_hat, n_seg = cross_spectra(Ys, dt, N)
    over, hw = 4, 3
    df = freqs[1]
    kmin, kmax = hw + 1, int(np.floor(0.4 / dt / df))
    f_fine = (kmin - hw) * df + np.arange((kmax - kmin) * over + 2 * hw * over + 1) * df / over
    # Hann bins are correlated with their neighbours: about one independent bin in 1.5
    grid = (f_fine, S_hat[kmin:kmax + 1], window_kernel(N, over, hw), over, n_seg / 1.5)
    walk = None if chain is None else walk_spectra(
        chain.drift_for(S_hat.shape[1]), N, dt, np.arange(kmin, kmax + 1), chain)
    return grid, (kmin * df, kmax * df), n_seg, N, walk


class Likelihood:
    """The penalised negative log posterior of (ξ, λ) on one Welch grid.

    Parameters
    ----------
    setup : CalibrationSetup;  priors : list of calibrate.Prior (ξ's Gaussian prior)
    Ys : list of (n_i, nch) sensor samples;  dt : sample interval [s]
    seg_s : Welch segment [s] (None: offline.load.welch.segment_length's default, 4 s)
    xi_start : (p,) ξ at which the load model is first fitted
    load_start : LoadModel or None: the load model to start from (default: fitted by
        :func:`offline.load.learn_load` at ``xi_start``: level, band, tilt and noise, with
        ``orders`` also the Butterworth roll-off orders). No resonant peaks in the load: a
        peak of the load would take up a resonance of the structure the model misplaces.
    chain : edge.acquisition.Chain or None: what the records are
        (:func:`offline.calibration.spectral_chain.records_chain`; None: point samples)
    """

    def __init__(self, setup, priors, Ys, dt, seg_s, xi_start, load_start=None, orders=False,
                 chain=None):
        self.su, self.dt, self.Ys = setup, float(dt), Ys
        self.tr = [p.transform for p in priors]
        self.m0 = np.array([p.mean for p in priors])
        self.s0 = np.array([p.std for p in priors])
        self.kinds = [int(k) for k in setup.out_kind]
        self.kind_names = [s.kind for s in setup.spec.sensors]
        rate = 1.0 / self.dt
        noise = NOISE_PRIOR * np.concatenate(Ys).std(axis=0)
        self.prior = LoadModel(forces=declared_force_models(setup.spec, rate), noise_std=noise)
        self.n_evals = 0
        if load_start is None:
            fit = learn_load(self.modal(xi_start), Ys, self.dt, self.prior, self.kind_names,
                             seg_s=seg_s, max_peaks=0, fit_orders=orders, chain=chain,
                             declared_below=False)
            W = fit.info["whittle"]
            self.grid = (W.f_fine, W.S_hat, W.kernel, W.over, W.K_eff)
            band, n_seg, N, self.walk = fit.info["band_hz"], fit.info["segments"], None, W.walk
        else:
            self.grid, band, n_seg, N, self.walk = welch_grid(Ys, self.dt, seg_s, chain)
        # G_c(f) on the fine grid: the records' spectra are the response's through the chain
        self.G = chain_gains(chain, self.grid[0], len(self.kinds))
        self.f_min, self.band = float(band[0]), [float(b) for b in band]
        self.segments = int(n_seg)
        self.seg_len = float(fit.info["segment_s"]) if N is None else N * self.dt
        self.L, self.lam0 = self.layout(fit.model if load_start is None else load_start)

    def layout(self, lm: LoadModel):
        """Whittle layout with the orders/peaks of ``lm`` and λ at it."""
        L = make_layout(self.prior.forces, self.prior.noise_std, 1.0 / self.dt, self.f_min,
                        len(lm.forces) > 1, orders=[m.orders for m in lm.forces],
                        peaks=[m.peaks for m in lm.forces], declared_below=False)
        return L, start_theta(L, lm.forces, lm.noise_std, lm.corr)

    def theta(self, xi) -> np.ndarray:
        return np.array([t.to_theta(x) for t, x in zip(self.tr, xi)])

    def modal(self, xi) -> ModalModel:
        return reduced_modal(self.su.pm.parts, self.theta(xi), self.su.B, self.su.out_rows)

    def whittle(self, xi) -> Whittle:
        f, S_hat, kern, over, K = self.grid
        self.n_evals += 1
        # S_m = G H S_ff H^H G^H + diag(walk) + diag(s^2) dt   (spectral_chain)
        return Whittle(f, through_chain(self.G, self.modal(xi).transfer(f, self.kinds)), S_hat,
                       kern, over, K, self.dt, walk=self.walk)

    def prior_xi(self, xi) -> float:
        z = (np.asarray(xi) - self.m0) / self.s0
        return 0.5 * float(z @ z)

    def nll(self, xi, lam) -> float:
        """-log p(Ŝ | ξ, λ) - log p(λ) - log p(ξ) (constants dropped)."""
        return self.whittle(xi).nll(self.L, lam) + self.prior_xi(xi)

    def objective(self, u, h: float = 1e-4):
        """Value and gradient on u = [(ξ - m0) / s0, λ] (ξ scaled by its prior std)."""
        p = self.m0.size
        xi, lam = self.m0 + self.s0 * u[:p], u[p:]
        g = np.empty_like(u)
        try:
            with np.errstate(all="ignore"):  # a line search may try an absurd load level
                v, g[p:] = self.whittle(xi).nll_grad(self.L, lam)
                for j in range(p):
                    # d/du_j by central differences of the likelihood at fixed λ
                    e = np.zeros(p)
                    e[j] = h * self.s0[j]
                    vp = self.whittle(xi + e).nll(self.L, lam)
                    vm = self.whittle(xi - e).nll(self.L, lam)
                    g[j] = (vp - vm) / (2 * h)
        except (OverflowError, np.linalg.LinAlgError):
            return 1e300, np.zeros_like(u)
        if not (np.isfinite(v) and np.all(np.isfinite(g))):
            return 1e300, np.zeros_like(u)
        g[:p] += u[:p]                                   # prior ½ |u|²
        return v + self.prior_xi(xi), g

    def optimise(self, xi, lam=None, maxiter: int = 200, width: float = 5.0):
        """Joint maximum of the posterior from (ξ, λ); ξ kept within ``width`` prior stds.
        Returns (ξ, λ, nll, converged)."""
        opt = need("scipy.optimize")
        p = self.m0.size
        lam = self.lam0 if lam is None else lam
        u0 = np.concatenate([(np.asarray(xi) - self.m0) / self.s0, lam])
        bnds = [(-width, width)] * p + self.L.bounds()
        u0[:p] = np.clip(u0[:p], -width + 1e-6, width - 1e-6)
        lo = np.array([b[0] if b[0] is not None else -np.inf for b in bnds])
        hi = np.array([b[1] if b[1] is not None else np.inf for b in bnds])
        u0 = np.clip(u0, lo + 1e-9, hi - 1e-9)
        r = opt.minimize(self.objective, u0, jac=True, method="L-BFGS-B", bounds=bnds,
                         options={"maxiter": maxiter})
        xi = self.m0 + self.s0 * r.x[:p]
        return xi, r.x[p:], float(r.fun), bool(r.success)

    def fisher(self, xi, lam, h: float = 1e-4) -> np.ndarray:
        """Fisher information of u = [(ξ - m0)/s0, λ] (``K Σ_k tr(E⁻¹ dE_a E⁻¹ dE_b)``,
        dE by central differences) plus the prior precisions (1 on u's ξ part)."""
        p = self.m0.size
        models = unpack(self.L, lam)
        E0 = self.whittle(xi).expected(*models)
        Ei = np.linalg.inv(E0)
        dE = []
        for j in range(p):
            e = np.zeros(p)
            e[j] = h * self.s0[j]
            dE.append(Ei @ (self.whittle(xi + e).expected(*models)
                            - self.whittle(xi - e).expected(*models)) / (2 * h))
        W = self.whittle(xi)
        for a in range(self.L.size):
            tp, tm = np.array(lam, float), np.array(lam, float)
            tp[a] += h
            tm[a] -= h
            dE.append(Ei @ (W.expected(*unpack(self.L, tp)) - W.expected(*unpack(self.L, tm)))
                      / (2 * h))
        n = len(dE)
        F = np.zeros((n, n))
        for a in range(n):
            for b in range(a + 1):
                F[a, b] = F[b, a] = self.grid[4] * float(np.sum(np.real(
                    np.einsum("kij,kji->k", dE[a], dE[b]))))
        return F + np.diag(np.concatenate([np.ones(p), 1.0 / np.asarray(self.L.sd) ** 2]))


@dataclass
class OperationalResult:
    """Posterior of an operational calibration (Laplace at the joint maximum).

    names, kinds : per parameter;  xi (p,), cov (p, p): Gaussian on ξ;  theta, theta_std (p,)
    load : LoadModel at the optimum;  nll : penalised negative log posterior there
    log_evidence : Laplace approximation of log p(records) (up to the Wishart constants)
    starts : [{"start", "theta", "nll"}] every start's end point;  modes : competing optima
    """

    names: list
    kinds: list
    transforms: list
    xi: np.ndarray
    cov: np.ndarray
    theta: np.ndarray
    theta_std: np.ndarray
    load: LoadModel
    nll: float
    log_evidence: float
    converged: bool
    starts: list = field(default_factory=list)
    modes: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    @property
    def corr(self) -> np.ndarray:
        d = np.sqrt(np.diag(self.cov))
        return self.cov / np.outer(d, d)

    def to_dict(self) -> dict:
        return {"names": list(self.names), "kinds": list(self.kinds),
                "mean": self.theta.tolist(), "std": self.theta_std.tolist(),
                "correlation": self.corr.tolist(),
                "xi": {"transforms": [t.to_dict() for t in self.transforms],
                       "mean": self.xi.tolist(), "cov": self.cov.tolist()},
                "free_energy": self.log_evidence, "nll": self.nll,
                "converged": bool(self.converged), "output_only": True,
                "method": "operational (Whittle likelihood, force as a stochastic input)",
                "load_model": self.load.as_meta(), "noise_std": {
                    "channels": self.load.noise_std.tolist()},
                "starts": self.starts, "competing_modes": self.modes, **self.info}


def starts_of(priors, kinds, n_draws: int, seed: int, extra=()):
    """[(label, ξ)]: the prior mean, one per damage zone, ``extra`` and seeded prior draws
    (within ±2 prior std)."""
    m0 = np.array([p.mean for p in priors])
    s0 = np.array([p.std for p in priors])
    out = [("prior mean", m0.copy())]
    for j, k in enumerate(kinds):
        if k == "damage":
            xi = m0.copy()
            xi[j] = float(priors[j].transform.to_xi(ZONE_START))
            out.append((f"{priors[j].name} = {ZONE_START}", xi))
    out.extend(extra)
    rng = np.random.default_rng(seed)
    for i in range(n_draws):
        out.append((f"prior draw {i + 1}", m0 + s0 * np.clip(rng.standard_normal(m0.size), -2, 2)))
    return out


def calibrate_operational(setup, priors, records, *, n_draws: int = 3, seed: int = 0,
                          extra_starts=(), keep: int = 2, seg_s=None, progress=None,
                          close_nats: float = 3.0) -> OperationalResult:
    """Operational calibration (module docstring).

    Parameters
    ----------
    setup : CalibrationSetup;  priors : ξ priors (calibrate.Settings.priors)
    records : list of data.Record (the sensors' samples from ``used[0]`` on)
    n_draws : prior draws among the starts;  extra_starts : [(label, ξ)] more starts
    keep : starts refined at full resolution;  seg_s : Welch segment of the fine stage [s]
    progress : callable(str) or None
    """
    t0 = time.perf_counter()
    say = (lambda s: progress(f"[{time.perf_counter() - t0:6.1f} s] {s}")) if progress \
        else (lambda s: None)
    dt = _common_dt(setup, records)
    chain, warning = records_chain(setup.spec, dt)
    Ys = [r.Y[r.used[0]:] for r in records]
    kinds = [p.kind for p in setup.parameters]
    m0 = np.array([p.mean for p in priors])
    starts = starts_of(priors, kinds, n_draws, seed, extra_starts)
    say(f"coarse stage: {len(starts)} starts on {COARSE_SEG_S:g} s Welch segments")
    coarse = Likelihood(setup, priors, Ys, dt, COARSE_SEG_S, m0, chain=chain)
    ends = _optimised_starts(coarse, starts, say)
    # the force's roll-off orders at the best coarse structure (the coarse grid sees a
    # force's band edges as well as the fine one, at an eighth of the cost)
    say("load model's roll-off orders at the best coarse point")
    lm = Likelihood(setup, priors, Ys, dt, COARSE_SEG_S, ends[0][2], orders=True, chain=chain)
    f_models, f_noise, f_corr = unpack(lm.L, lm.lam0)
    load0 = LoadModel(forces=f_models, corr=f_corr, noise_std=f_noise)
    distinct = _distinct_ends(ends, coarse.s0)
    say(f"fine stage: the best {min(keep, len(distinct))} distinct start(s) refined")
    fine_ends = _refined_ends(distinct[:keep], lambda xi: Likelihood(
        setup, priors, Ys, dt, seg_s, xi, load_start=load0, chain=chain), say)
    v, label, xi, lam, ok, lik = fine_ends[0]
    cov, log_z = _laplace(lik, xi, lam, v, m0.size)
    th = lik.theta(xi)
    dth = np.array([abs(float(t.dtheta_dxi(x))) for t, x in zip(lik.tr, xi)])
    models, noise, corr = unpack(lik.L, lam)
    load = LoadModel(forces=models, corr=corr, noise_std=noise, source="record",
                     info={"band_hz": list(lik.band), "segments": lik.segments,
                           "segment_s": lik.seg_len})
    modes = [{"start": lb, "theta": lk.theta(x).tolist(), "nll": vv, "delta_nll": vv - v}
             for vv, lb, x, _, _, lk in fine_ends[1:]
             if vv - v < close_nats and np.max(np.abs((x - xi) / lik.s0)) > 0.5]
    res = OperationalResult(
        names=[p_.name for p_ in priors], kinds=kinds, transforms=lik.tr, xi=xi, cov=cov,
        theta=th, theta_std=dth * np.sqrt(np.diag(cov)), load=load, nll=v, log_evidence=log_z,
        converged=ok,
        starts=[{"start": lb, "stage": "coarse", "theta": coarse.theta(x).tolist(), "nll": vv}
                for vv, lb, x, _ in ends]
        + [{"start": lb, "stage": "fine", "theta": lk.theta(x).tolist(), "nll": vv}
           for vv, lb, x, _, _, lk in fine_ends],
        modes=modes,
        info={"prior": {"median": [float(t.to_theta(m)) for t, m in zip(lik.tr, m0)],
                        "xi_mean": m0.tolist(), "xi_std": lik.s0.tolist()},
              "best_start": label, "seconds": time.perf_counter() - t0,
              "model_evaluations": coarse.n_evals + lm.n_evals + sum(e[5].n_evals for e in fine_ends),
              "band_hz": list(lik.band), "welch_segments": lik.segments,
              "segment_s": lik.seg_len, "measurement": measurement_label(chain),
              **({"chain_warning": warning} if warning else {})})
    return res


def _common_dt(setup, records) -> float:
    """The records' one sample interval; ValueError when they differ or there is no force."""
    if len({round(r.dt, 12) for r in records}) != 1:
        raise ValueError("records have different sample intervals "
                         f"{sorted({r.dt for r in records})}")
    if not setup.forces:
        raise ValueError(f"{setup.where}: no [[forces]]: the operational likelihood needs "
                         f"where the unknown forces act (their spectra are fitted)")
    return records[0].dt


def _optimised_starts(coarse, starts, say) -> list:
    """``[(nll, label, ξ, λ)]`` of each start optimised on ``coarse``, best first."""
    ends = []
    for label, xi in starts:
        xi1, lam1, v, _ = coarse.optimise(xi)
        ends.append((v, label, xi1, lam1))
        say(f"  start {label}: nll {v:.1f}, theta {np.round(coarse.theta(xi1), 5).tolist()}")
    ends.sort(key=lambda e: e[0])
    return ends


def _distinct_ends(ends, s0) -> list:
    """The ends (best first) not within 0.2 prior std ``s0`` of a better one (the same
    optimum)."""
    distinct = []
    for e in ends:
        if all(np.max(np.abs(e[2] - d[2]) / s0) > 0.2 for d in distinct):
            distinct.append(e)
    return distinct


def _refined_ends(ends, likelihood_at, say) -> list:
    """``[(nll, label, ξ, λ, converged, likelihood)]``: each end optimised again on the fine
    likelihood ``likelihood_at(ξ)`` built at it, best first."""
    fine_ends = []
    for v, label, xi, _ in ends:
        fine = likelihood_at(xi)
        xi3, lam3, v3, ok = fine.optimise(xi)
        fine_ends.append((v3, label, xi3, lam3, ok, fine))
        say(f"  from {label}: nll {v3:.1f}, theta {np.round(fine.theta(xi3), 5).tolist()}")
    fine_ends.sort(key=lambda e: e[0])
    return fine_ends


def _laplace(lik, xi, lam, nll: float, p: int):
    """``(cov, log_z)``: the ξ posterior covariance (the inverse Fisher information in
    u-space, scaled by the prior stds) and the Laplace evidence."""
    cov_u = np.linalg.inv(lik.fisher(xi, lam))
    s0 = lik.s0
    cov = cov_u[:p, :p] * np.outer(s0, s0)
    # Laplace: log Z ≈ -nll* + ½ log det(2π Σ_u) - Σ log(σ_prior √2π)   (u-space prior of ξ
    # has unit std; λ's prior stds from the layout)
    sd_all = np.concatenate([np.ones(p), np.asarray(lik.L.sd)])
    logdet = np.linalg.slogdet(cov_u)[1]
    log_z = -nll + 0.5 * (logdet + cov_u.shape[0] * np.log(2 * np.pi)) \
        - float(np.sum(np.log(sd_all * np.sqrt(2 * np.pi))))
    return cov, log_z
