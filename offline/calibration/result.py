"""Result of a calibration: posterior summary (JSON), calibrated model file, fit."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from edge.inverse import modal
from offline.calibration import measurement
from offline.calibration.bilinear import matrices
from offline.inverse.fromfile import _edit


@dataclass
class Result:
    """Posterior of a calibration run (see :func:`offline.calibration.calibrate.calibrate`).

    Attributes
    ----------
    problem : Problem      residuals, records, transforms
    vb : VBResult          ξ posterior N(m, Λ⁻¹), Gamma noise posteriors, free energy
    groups : list of NoiseGroup   priors with the likelihood weights used
    rho : list of float    residual lag-1 correlation per group (before weighting)
    nonlinearity : (p,)    paper 003 eq. 18 per parameter (on ξ)
    seconds : float
    modes : list of dict   the best and the runner-up optimum of the starting-point screen
                           (start, free energy, θ), empty with one optimum
    undetermined : list of dict   directions the records do not determine
                           (:func:`offline.calibration.identify.describe`); the covariance
                           is widened along them
    profiles : list of dict   every profiled direction (ΔΦ along it)
    discretisation : dict or None   the refined forward model's shift, included in the
                           covariance (:func:`offline.calibration.discretisation.check`)
    """

    problem: object
    vb: object
    groups: list
    rho: list
    nonlinearity: np.ndarray
    seconds: float
    modes: list = field(default_factory=list)
    undetermined: list = field(default_factory=list)
    profiles: list = field(default_factory=list)
    discretisation: dict | None = None

    @property
    def determined(self) -> dict:
        """{name: False} for every parameter on an undetermined direction, else True: its
        point estimate alone is not a finding of the records."""
        off = {n for u in self.undetermined for n in u["parameters"]}
        return {n: n not in off for n in self.names}

    @property
    def names(self) -> list:
        return list(self.problem.names)

    @property
    def theta(self) -> np.ndarray:
        """Posterior median of every parameter θ = t(m) (SI; offsets in the channel's unit)."""
        p = self.problem
        th = list(p.theta(self.vb.m))
        for i, c in enumerate(p.off_ch):
            th.append(self.vb.m[p.nmodel + i] * p.scale[c])
        return np.array(th)

    @property
    def theta_std(self) -> np.ndarray:
        """Posterior std of θ by the delta method, |dθ/dξ| σ_ξ."""
        p = self.problem
        s = self.vb.std
        d = [abs(float(t.dtheta_dxi(x))) for t, x in zip(p.transforms, self.vb.m[:p.nmodel])]
        d += [float(p.scale[c]) for c in p.off_ch]
        return np.array(d) * s

    def interval95(self) -> np.ndarray:
        """(p, 2) θ at ξ = m ∓ 1.96 σ_ξ: the 95 % interval through the transform (the delta-
        method std understates a damage far from 0 in ξ, e.g. a zone at its prior)."""
        p = self.problem
        m, s = self.vb.m, self.vb.std
        out = []
        for i in range(len(m)):
            lo, hi = m[i] - 1.96 * s[i], m[i] + 1.96 * s[i]
            if i < p.nmodel:
                lo, hi = p.transforms[i].to_theta(lo), p.transforms[i].to_theta(hi)
            else:
                lo, hi = lo * p.scale[p.off_ch[i - p.nmodel]], hi * p.scale[p.off_ch[i - p.nmodel]]
            out.append(sorted((float(lo), float(hi))))
        return np.array(out)

    def exceedance(self, i: int, threshold: float, above: bool = True) -> float:
        """P(θ_i > threshold) (or <) under the Gaussian posterior of ξ_i."""
        from scipy.stats import norm
        p = self.problem
        t = p.transforms[i] if i < p.nmodel else None
        x = t.to_xi(threshold) if t is not None else threshold / p.scale[p.off_ch[i - p.nmodel]]
        z = (x - self.vb.m[i]) / self.vb.std[i]
        return float(norm.sf(z) if above else norm.cdf(z))

    def noise_std(self) -> dict:
        """Noise std per group in the channels' unit (scale / sqrt(E[Φ]))."""
        p = self.problem
        out = {}
        for name, chans, q in zip(p.group_names, p.groups_of, self.vb.noise):
            out[name] = float(np.mean([p.scale[c] for c in chans]) * q.std_noise)
        return out

    def to_dict(self, model_sha256: str | None = None) -> dict:
        p = self.problem
        prior_theta = [float(t.to_theta(pr.mean)) for t, pr in zip(p.transforms, p.priors)]
        return {
            "names": self.names,
            "kinds": [q.kind for q in p.setup.parameters] + ["offset"] * len(p.off_ch),
            "mean": self.theta.tolist(),
            "std": self.theta_std.tolist(),
            "interval95": self.interval95().tolist(),
            "correlation": self.vb.corr.tolist(),
            "xi": {"transforms": [t.to_dict() for t in p.transforms]
                   + [{"kind": "identity"}] * len(p.off_ch),
                   "mean": self.vb.m.tolist(), "cov": self.vb.cov.tolist()},
            "prior": {"median": prior_theta + [0.0] * len(p.off_ch),
                      "xi_mean": p.m0.tolist(), "xi_std": [pr.std for pr in p.priors]},
            "noise_std": self.noise_std(),
            "noise_groups": {g.name: {"weight": g.weight, "lag1": r, "channels":
                                      [p.setup.sensors[c] for c in ch]}
                             for g, r, ch in zip(self.groups, self.rho, p.groups_of)},
            "free_energy": self.vb.F,
            "nonlinearity": dict(zip(self.names, map(float, self.nonlinearity))),
            "converged": bool(self.vb.converged),
            "stop": getattr(self.vb, "stop", "converged"),
            "determined": self.determined,
            "identifiability": {"undetermined": self.undetermined, "profiles": self.profiles},
            "modes": self.modes,
            "discretisation": self.discretisation,
            "measurement": (measurement.describe(p.tm.measurement.chain)
                            if p.tm.measurement is not None else "point samples"),
            "reduction": {"method": p.setup.reduction_method,
                          "sensitivity": p.setup.sensitivity,
                          "added_masters": p.setup.added_masters},
            "iterations": self.vb.iterations,
            "model_evaluations": p.n_evals,
            "seconds": self.seconds,
            "data": [{"file": r.name, "sha256": r.sha256, "samples": int(r.Y.shape[0]),
                      "used": int(r.used.size), "repaired": r.repaired} for r in p.records],
            "model_sha256": model_sha256,
        }

    def calibrated_raw(self) -> dict:
        """The model file's parsed TOML with the posterior medians applied."""
        p = self.problem
        return calibrated_raw(p.setup, self.theta[:p.nmodel])

    def fit(self):
        """[(record name, time (nt,), measured (nt, nch), model (nt, nch))] at the posterior."""
        sims = self.problem.simulate(self.vb.m, jac=False)
        return [(r.name, np.arange(r.Y.shape[0]) * r.dt, r.Y, Y)
                for r, (Y, _) in zip(self.problem.records, sims)]


def calibrated_raw(setup, theta) -> dict:
    """``setup``'s parsed model file with the parameter values ``theta`` (p,) applied (damage
    zones as ``[[damage]]``, a damping ratio as ``[damping] ratios`` at its modes)."""
    raw = copy.deepcopy(setup.spec.raw)
    params = setup.parameters
    th = np.asarray(theta, dtype=float)
    raw = _edit(raw, params, th, setup.where)
    for item, v in zip(raw.get("parameters", []), th):
        if "nominal" in item:
            item["nominal"] = float(v)
    kinds = [q.kind for q in params]
    if "damping_ratio" in kinds:
        # ζ is the ratio at modes (i, j) of the parametric model at θ (forward.damped_
        # matrices): written as [damping] ratios at those modes' frequencies, the file's
        # Rayleigh pair is the calibrated one (_edit leaves [damping] alone)
        parts = setup.pm.parts
        w2, _ = modal(*matrices(parts, th)[:2])
        zeta = float(th[kinds.index("damping_ratio")])
        raw["damping"] = {"ratios": [[float(np.sqrt(w2[int(m) - 1]) / (2 * np.pi)), zeta]
                                     for m in parts.modes]}
    return raw
