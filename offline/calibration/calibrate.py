"""Calibration of a model file's parameters from force-and-response records (paper 003).

Parameters live on ξ = t⁻¹(θ) (:mod:`transforms`) with a Gaussian prior; by default positive
kinds (modulus, spring, damping ratio) get ``log`` with the prior median at the nominal value
and the ``bounds`` at ±2σ, masses ``identity`` with the box centre ± 2σ at the bounds. The
``[bayes]`` table of the model file overrides this (its keys: offline/model/schema_update.py)::

    [bayes]
    noise = "channel"            # one noise group per sensor ("channel") or one for all ("one")
    offsets = ["d110"]           # sensor offsets calibrated as parameters (paper 003 eq. 2)
    autocorrelation = true       # likelihood weights N_eff/N (noise.spectral_weight)
    [bayes.prior.E]              # per parameter: transform, and mean/std of θ (log: of log θ)
    transform = "log"   median = 69e9   log_std = 0.1
    [bayes.data]                 # offline.calibration.data.Prep
    filter_hz = 200.0   decimate = 2   skip_s = 0.0

Residuals kᵢ = (g - y) / scale_c per channel c, scale_c = the measured channel's std over all
records (dimensionless residuals; the noise std is reported back in the channel's unit).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from offline.calibration import discretisation, measurement
from offline.calibration.data import Prep, read_record
from offline.calibration.forward import TimeModel
from offline.calibration.identify import analyse, leaning_text
from offline.calibration.noise import NoiseGroup, spectral_weight
from offline.calibration.nonlinearity import nonlinearity_measure
from offline.calibration.result import Result
from offline.calibration.starts import (
    CLOSE_F,
    REFINE_GAP,
    SAME_MODE,
    polish,
    screen,
    starting_points,
)
from offline.calibration.transforms import Transform
from offline.calibration.vb import variational_bayes
from offline.load.units import check_record_levels
from offline.model.table import ModelFileError
from offline.model.update import POSITIVE, parse_bayes


@dataclass(frozen=True)
class Prior:
    """Gaussian prior of ξ = t⁻¹(θ) for one parameter."""

    name: str
    transform: Transform
    mean: float      # of ξ
    std: float       # of ξ


@dataclass
class Settings:
    """Calibration settings (``[bayes]``)."""

    priors: list
    noise: str = "channel"
    offsets: tuple = ()
    autocorrelation: bool = True
    prep: Prep = field(default_factory=Prep)
    substeps: int = 16
    tol: float = 1e-3
    max_iter: int = 40
    step_tol: float = 0.01     # stop when the mean's next step is < 1 % of its posterior std
    multistart: bool = True    # screen several starting points (offline.calibration.starts)
    draws: int = 2             # prior draws among the starting points
    screen_iter: int = 20      # model runs of each screening search (two passes)
    screen_s: float = 2.0      # seconds of each record the screen fits (from its start)
    identifiability: bool = True   # profile the weak directions (offline.calibration.identify)
    discretisation: bool = True    # the refined forward model's shift in the covariance


def default_prior(p) -> Prior:
    lo, hi = p.bounds
    nom = p.theta0 if p.nominal is None else p.nominal
    if p.kind == "damage":
        # paper 003 Sect. 4.4: W ~ N(0, 1/2), ω = S(W, ε = 0.1)                (eq. 24-25)
        return Prior(p.name, Transform("damage", eps=0.1), 0.0, float(np.sqrt(0.5)))
    if p.kind in POSITIVE and lo > 0:
        # log θ ~ N(log θ0, σ²), the bounds at ±2σ
        return Prior(p.name, Transform("log"), float(np.log(nom)), float(np.log(hi / lo) / 4))
    return Prior(p.name, Transform("identity"), float(nom), float((hi - lo) / 4))


def settings_from_raw(raw: dict, parameters, where: str) -> Settings:
    """Parse ``[bayes]`` (absent: defaults) -> :class:`Settings`, through the model file's
    schema (:func:`offline.model.update.parse_bayes`; errors are ``ModelFileError`` naming the
    key)."""
    b = parse_bayes(raw, where, parameters)
    priors = []
    for p in parameters:
        d = b["prior"].get(p.name)
        if d is None:
            priors.append(default_prior(p))
            continue
        tk, c, std = d["transform"], d["centre"], d["std"]
        if tk == "log":      # log theta ~ N(log median, log_std^2)
            tr, mean = Transform("log"), float(np.log(c))
        elif tk == "identity":
            tr, mean = Transform("identity"), float(c)
        else:                # logit on the bounds, centred on the median
            tr = Transform("logit", *p.bounds)
            mean = float(tr.to_xi(c))
        if not np.isfinite(mean):
            raise ModelFileError(f"{where}: [bayes].prior.{p.name}: the prior needs a finite "
                                 "centre")
        priors.append(Prior(p.name, tr, mean, float(std)))
    keep = ("noise", "autocorrelation", "substeps", "tol", "max_iter", "step_tol", "multistart",
            "draws", "screen_iter", "screen_s", "identifiability", "discretisation")
    return Settings(priors=priors, offsets=b["offsets"], prep=Prep(**b["data"]),
                    **{k: b[k] for k in keep})


class Problem:
    """Residuals and Jacobians of all records, grouped by noise group."""

    def __init__(self, setup, records, settings: Settings):
        self.setup, self.records, self.s = setup, list(records), settings
        nch = len(setup.sensors)
        self.nmodel = len(setup.parameters)
        bad = [o for o in settings.offsets if o not in setup.sensors]
        if bad:
            raise ModelFileError(f"{setup.where}: [bayes].offsets: {bad[0]!r} is not a "
                                 f"[[sensors]] name (have {', '.join(setup.sensors)})")
        self.off_ch = [setup.sensors.index(o) for o in settings.offsets]
        dts = {round(r.dt, 12) for r in self.records}
        if len(dts) != 1:
            raise ValueError(f"records have different sample intervals {sorted(dts)}")
        # the records hold the response through the model file's measurement chain
        meas, self.chain_warning = measurement.of_records(setup.spec, self.records[0].dt)
        self.tm = TimeModel(setup.pm.parts, setup.B, setup.out_rows, setup.out_kind,
                            self.records[0].dt, settings.substeps, measurement=meas)
        Yall = np.vstack([r.Y[r.used] for r in self.records])
        self.scale = Yall.std(axis=0)
        if np.any(self.scale <= 0):
            raise ValueError(f"sensor(s) {[setup.sensors[c] for c in np.flatnonzero(self.scale <= 0)]} "
                             f"are constant in every record: nothing to calibrate against")
        self.groups_of = [[c] for c in range(nch)] if settings.noise == "channel" else [list(range(nch))]
        self.group_names = ([setup.sensors[c] for c in range(nch)] if settings.noise == "channel"
                            else ["all"])
        self.transforms = [p.transform for p in settings.priors]
        off_pri = [Prior(f"offset_{setup.sensors[c]}", Transform("identity"), 0.0, 1.0)
                   for c in self.off_ch]   # ξ = offset / scale_c ~ N(0, 1)
        self.priors = list(settings.priors) + off_pri
        self.names = [p.name for p in self.priors]
        self.m0 = np.array([p.mean for p in self.priors])
        self.L0 = np.diag(1.0 / np.array([p.std for p in self.priors]) ** 2)
        self.n_evals = 0
        self._Fk = {}      # id(record) -> force at the sub-step points (record-only input)

    def theta(self, xi) -> np.ndarray:
        return np.array([t.to_theta(x) for t, x in zip(self.transforms, xi[:self.nmodel])])

    def simulate(self, xi, jac=True):
        """Model outputs per record (nt, nch) and d/dξ (p, nt, nch), offsets included."""
        th = self.theta(xi)
        dth = np.array([t.dtheta_dxi(x) for t, x in zip(self.transforms, xi[:self.nmodel])])
        out = []
        for r in self.records:
            if id(r) not in self._Fk:
                self._Fk[id(r)] = self.tm.substep_force(r.F)
            Y, dY = self.tm.run(th, r.F, jac=jac, Fk=self._Fk[id(r)])
            self.n_evals += 1
            dX = None
            if jac:
                dX = np.zeros((len(xi),) + Y.shape)
                dX[:self.nmodel] = dY * dth[:, None, None]      # chain rule dθ/dξ
            for i, c in enumerate(self.off_ch):
                Y[:, c] += xi[self.nmodel + i] * self.scale[c]  # y = g + offset  (eq. 2)
                if jac:
                    dX[self.nmodel + i, :, c] = self.scale[c]
            out.append((Y, dX))
        return out

    def residuals(self, xi, jac=True):
        """(k, J): per noise group, k = (g - y)/scale over the used samples of all records."""
        sims = self.simulate(np.asarray(xi, float), jac)
        k, J = [], []
        for chans in self.groups_of:
            kk, JJ = [], []
            for (Y, dX), r in zip(sims, self.records):
                for c in chans:
                    kk.append((Y[r.used, c] - r.Y[r.used, c]) / self.scale[c])
                    if jac:
                        JJ.append(dX[:, r.used, c].T / self.scale[c])
            k.append(np.concatenate(kk))
            J.append(np.vstack(JJ) if jac else None)
        return k, J

    def segments(self, gi, kg, Jg):
        """(k, J) pieces of group ``gi``'s stacked residual, one per record and channel (the
        order :meth:`residuals` stacks them in)."""
        pos, out = 0, []
        for r in self.records:
            for _ in self.groups_of[gi]:
                out.append((kg[pos:pos + r.used.size], Jg[pos:pos + r.used.size]))
                pos += r.used.size
        return out

    def lag1(self, k) -> list[float]:
        """Lag-one autocorrelation of each group's residual (per record and channel, pooled)."""
        out = []
        for chans, kg in zip(self.groups_of, k):
            num = den = 0.0
            pos = 0
            for r in self.records:
                for _ in chans:
                    seg = kg[pos:pos + r.used.size]
                    pos += r.used.size
                    seg = seg - seg.mean()
                    num += seg[1:] @ seg[:-1]
                    den += seg @ seg
            out.append(float(num / den) if den > 0 else 0.0)
        return out


def check_units(prob, names, progress: bool = False) -> None:
    """A force or response column in another unit (kN for N, mm for m): each channel's RMS
    against the model's response at the prior mean to the records' force columns, refused
    beyond :data:`offline.load.units.REFUSE_FACTOR` either way (naming the records, the
    column and the factor), warned beyond ``WARN_FACTOR`` (a prior that far off moves the
    response's RMS by a few times at most: damping 10x off, sqrt(10))."""
    sims = prob.simulate(prob.m0, jac=False)
    meas = np.vstack([r.Y[r.used] for r in prob.records])
    pred = np.vstack([Y[r.used] for (Y, _), r in zip(sims, prob.records)])
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.sqrt(np.mean(meas ** 2, axis=0) / np.mean(pred ** 2, axis=0))
    what = (f"the records' force columns {list(prob.setup.forces)} with the parameters at "
            "their prior mean")
    for w in check_record_levels(factors, prob.setup.sensors, names, what):
        print(f"warning: {w}", flush=True)


def hash_file(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def calibrate(setup, record_paths, settings: Settings | None = None, progress: bool = False,
              records=None, m_init=None):
    """VB calibration (module docstring); returns :class:`offline.calibration.result.Result`.

    ``m_init``: first expansion point in ξ; without it (and with ``[bayes] multistart``, the
    default) the best of a screen of starting points (:mod:`offline.calibration.starts`)."""
    t0 = time.perf_counter()
    if settings is None:
        settings = settings_from_raw(setup.spec.raw, setup.parameters, setup.where)
    if records is None:
        records = [read_record(p, setup.forces, setup.sensors, settings.prep) for p in record_paths]
    prob = Problem(setup, records, settings)
    if prob.chain_warning:
        print(f"warning: {prob.chain_warning}", flush=True)
    elif progress and prob.tm.measurement is not None:
        print(f"  the records through the model file's measurement chain: "
              f"{measurement.describe(prob.tm.measurement.chain)}", flush=True)
    check_units(prob, [r.name for r in records], progress)
    modes = []
    if m_init is None and settings.multistart:
        modes, m_init = _screen_starts(prob, setup, records, settings, progress)
    res, groups, rho = _weighted_vb(prob, settings, m_init, progress)
    res, competing = _runner_up(prob, res, groups, modes, settings, progress)
    undetermined, profiles = [], []
    if settings.identifiability:
        res, undetermined, profiles = _identify(prob, res, groups, modes, settings, progress)
    k, J = prob.residuals(res.m)
    scale = [np.sqrt(g.weight * q.mean) for g, q in zip(groups, res.noise)]
    L, _ = nonlinearity_measure(lambda xi: prob.residuals(xi, jac=False)[0], res.m, res.std,
                                k, J, scale=scale)
    # after the nonlinearity measure: that one is of the Gaussian posterior of this model
    disc = _discretisation(prob, res, groups, k, J, progress) if settings.discretisation else None
    if disc is not None:
        # the leaning parameters' lines quote the std that now includes the shift
        th, sd = prob.theta(res.m), res.std
        for u in (u for u in undetermined if u.get("prior_dependent")):
            i = prob.names.index(u["parameters"][0])
            u["text"] = leaning_text(prob.names[i], th[i], float(
                sd[i] * abs(prob.transforms[i].dtheta_dxi(res.m[i]))), u["others"], u["std_ratio"])
    return Result(problem=prob, vb=res, groups=groups, rho=rho, nonlinearity=L,
                  seconds=time.perf_counter() - t0, modes=competing, undetermined=undetermined,
                  profiles=profiles, discretisation=disc)


def _discretisation(prob, res, groups, k, J, progress):
    """:func:`offline.calibration.discretisation.check` with ``prob``'s refined twins: the
    time step refined, and the time step and the basis (``setup.refine``) refined."""
    s_ref = replace(prob.s, substeps=discretisation.REFINE_STEPS * prob.s.substeps)
    ref_time = Problem(prob.setup, prob.records, s_ref)
    r = prob.setup.refine() if prob.setup.refine is not None else None
    ref_all = None if r is None else Problem(replace(prob.setup, pm=r[0], out_rows=r[1], B=r[2]),
                                             prob.records, s_ref)
    out = discretisation.check(prob, res, groups, k, J, ref_time, ref_all)
    if progress:
        print("  " + discretisation.summary(out, prob.names), flush=True)
    return out


def _screen_starts(prob, setup, records, settings, progress):
    """``(modes, m_init)``: the distinct optima of a screen of starting points on the
    records' first ``screen_s`` seconds (best first), and the best one polished on the whole
    records."""
    kinds = [q.kind for q in setup.parameters] + ["offset"] * len(prob.off_ch)
    starts = starting_points(prob.m0, 1.0 / np.sqrt(np.diag(prob.L0)), prob.names, kinds,
                             draws=settings.draws)
    if progress:
        print(f"  screening {len(starts)} starting points ...", flush=True)
    # the screen fits the first screen_s seconds of each record: it looks for the basin,
    # the calibration below fits everything
    head = [replace(r, F=r.F[:n], Y=r.Y[:n], used=r.used[r.used < n]) for r in records
            for n in [max(int(round(settings.screen_s / r.dt)), 16)]]
    sprob = Problem(setup, head, settings)
    modes = screen(sprob, starts, max_iter=settings.screen_iter)
    prob.n_evals += sprob.n_evals
    # the best basin's optimum on the whole records: the likelihood weights below are
    # measured there (at a point off the optimum they measure the misfit and come out tiny)
    m_init = polish(prob, modes[0].m, settings.screen_iter)
    if progress:
        print(f"  {len(modes)} distinct optimum/optima; best from {modes[0].start} "
              f"(log posterior {modes[0].F:.3f})", flush=True)
    return modes, m_init


def _weighted_vb(prob, settings, m_init, progress):
    """``(res, groups, rho)``: VB with each noise group's likelihood weight (its effective
    sample share from the residuals' spectrum), re-estimated at the posterior mean until the
    weights settle within 25 % (at most 4 passes)."""
    say = (lambda it, F, m: print(f"  VB iteration {it}: F = {F:.3f}", flush=True)) if progress else None
    rho = [0.0] * len(prob.group_names)
    weights = [1.0] * len(rho)

    def weights_of(xi):
        k, J = prob.residuals(xi, jac=True)
        # N_eff / N from the residual spectrum where the Jacobian acts (noise.spectral_weight)
        return prob.lag1(k), [spectral_weight(prob.segments(i, kk, JJ))[0]
                              for i, (kk, JJ) in enumerate(zip(k, J))]

    if settings.autocorrelation:
        # start tempered: the residual at the prior mean is mostly model error at the modes, so
        # the first pass takes short, prior-regularised steps; later passes re-estimate the
        # weights at the posterior mean
        rho, weights = weights_of(prob.m0 if m_init is None else np.asarray(m_init, float))
    res, n_vb = None, 0
    for _ in range(4):
        groups = [NoiseGroup.vague(g, weight=w) for g, w in zip(prob.group_names, weights)]
        if progress:
            print(f"  likelihood weights {np.round(weights, 4).tolist()} "
                  f"(residual lag-1 correlation {np.round(rho, 3).tolist()})", flush=True)
        res = variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=settings.tol,
                                max_iter=settings.max_iter, callback=say, m_init=m_init,
                                step_tol=settings.step_tol)
        n_vb += res.n_evals
        m_init = res.m
        if not settings.autocorrelation:
            break
        rho, new = weights_of(res.m)
        if all(abs(np.log(a / b)) < np.log(1.25) for a, b in zip(new, weights)):
            break
        weights = new
    res.n_evals = n_vb
    return res, groups, rho


def _runner_up(prob, res, groups, modes, settings, progress):
    """``(res, competing)``: where the screen's runner-up basin is within ``REFINE_GAP`` of the
    best, it is refined with the same likelihood weights (the free energies then compare);
    the better one is ``res``, and both are listed when they are distinct optima."""
    if not (len(modes) > 1 and modes[0].F - modes[1].F < REFINE_GAP):
        return res, []
    alt = variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=settings.tol,
                            max_iter=settings.max_iter, m_init=modes[1].m,
                            step_tol=settings.step_tol)
    res.n_evals += alt.n_evals
    alt_start, best_start = modes[1].start, modes[0].start
    if alt.F > res.F:
        res, alt = alt, res
        best_start, alt_start = alt_start, best_start
    std0 = 1.0 / np.sqrt(np.diag(prob.L0))
    if np.max(np.abs(alt.m - res.m) / std0) < SAME_MODE:   # both runs met
        return res, []
    competing = [{"start": best_start, "free_energy": float(res.F),
                  "theta": prob.theta(res.m).tolist()},
                 {"start": alt_start, "free_energy": float(alt.F),
                  "theta": prob.theta(alt.m).tolist()}]
    if progress:
        print(f"  runner-up optimum (from {alt_start}): free energy {alt.F:.3f} against "
              f"{res.F:.3f}" + (" -- CLOSE: the records hardly prefer the answer"
                                if res.F - alt.F < CLOSE_F else ""), flush=True)
    return res, competing


def _identify(prob, res, groups, modes, settings, progress):
    """:func:`offline.calibration.identify.analyse` with VB restarts at a better point."""
    def restart(xi):
        if progress:
            print("  a profile found a better optimum: VB again from there", flush=True)
        r = variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=settings.tol,
                              max_iter=settings.max_iter, m_init=xi, step_tol=settings.step_tol)
        r.n_evals += res.n_evals
        return r

    n0 = prob.n_evals
    out, undetermined, dirs = analyse(prob, res, groups, [(md.start, md.m) for md in modes[1:4]],
                                      restart)
    if progress:
        print(f"  identifiability: {len(dirs)} direction(s) profiled "
              f"({prob.n_evals - n0} model runs)", flush=True)
        for u in undetermined:
            print(f"  NOT DETERMINED: {u['text']}", flush=True)
    return out, undetermined, [{"source": c.source, "local_ratio": c.ratio, "t": c.t,
                                "dphi": c.dphi, "interval": [c.lo, c.hi],
                                "undetermined": c.undetermined,
                                "direction": dict(zip(prob.names, c.d.tolist()))} for c in dirs]
