"""Learn the load model and the sensor noise from records of the structure in operation.

``vsense-offline build MODEL.toml --record RUN.csv [--record ...]``: the records (the replay
input format: ``time`` and one column per ``[[sensors]]`` entry; the forces unknown) give
Welch cross-spectral matrices; the full model's transfer functions turn a load model into
their expectation; the load model that maximises the Whittle likelihood
(:mod:`offline.load.whittle`) with the declaration as its prior is the fit:

1. the sensor noise from the quietest part of each channel's spectrum, the overall level
   by a scan over 12 decades (a load 50x off its declaration is found, not approached);
2. with several forces, source components (:mod:`offline.load.sources`): resonances that
   drive every force along one direction, where the forces' spectra the records imply
   peak; kept when they raise the likelihood by more than their BIC cost, and then the
   forces' own filters are a broadband floor of the declared shape (stages 3-5 skipped);
3. each force's level, band corners and tilt (the shape between them) jointly with the
   channels' noise;
4. each force's Butterworth orders (roll-off steepness, 1-8) one force at a time;
5. resonant peaks (a source resonance in the load): where the forces' spectrum expected
   from the records exceeds the model's by 2x or more, a peak section, kept when it raises
   the likelihood by more than its BIC cost;
6. the fit again from the declaration's corners and tilt (:mod:`offline.load.restart`: the
   staged fit can end in a local optimum), the best start kept; a declared corner below the
   records' band kept unless they reject it (:mod:`offline.load.corner`); the correlation of
   the forces (several forces), then everything jointly; a component's direction entries
   the records do not fix go to their prior mean, their posterior second moment to
   components of the same resonance.

The records are point samples: where the declaration predicts a fold-back from above the
Nyquist frequency, the expectation includes the alias images up to ``2 fs``.

Why Whittle: the records' second-order statistics are all a Gaussian load model can use;
in the frequency domain the likelihood of a 20 s record of 10 channels costs a few thousand
small matrix factorisations instead of a Kalman filter pass per trial, and the full model's
transfer functions (not the estimator's reduced model) enter exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from edge.kinds import kind_order
from offline._deps import need
from offline.load.model import LoadModel
# read_records and MIN_RECORD_S are imported from here by the load package and its selection
from offline.load.records import MIN_RECORD_S, read_records, unidentified_noise  # noqa: F401
from offline.load.welch import cross_spectra, peak_of_ratio, segment_length, window_kernel
from offline.load.corner import keep_declared_corners, start_in_records
from offline.load.restart import restart_from_declaration
from offline.load.sources import candidates, direction_uncertainty
from offline.load.walk import walk_spectra
from offline.load.whittle import LN10, Whittle, components, make_layout, start_theta, unpack

ORDERS_HP = (1, 2, 4, 8)
ORDERS_LP = (1, 2, 4, 8, 16)


@dataclass
class LoadFit:
    """A fitted load model and how well the records determine it."""

    model: LoadModel
    prior: LoadModel
    identified: dict              # name -> bool (level of each force, noise of each channel)
    posterior_sd: dict            # name -> std of ln rms / ln noise (Laplace)
    nll: float
    info: dict = field(default_factory=dict)

    def summary(self, force_names, channel_names, units=None) -> str:
        lines = [f"load model learned from {self.info.get('records', '?')} record(s), "
                 f"{self.info.get('seconds', 0):.1f} s (Whittle likelihood, "
                 f"{self.info.get('segments', '?')} Welch segments of "
                 f"{self.info.get('segment_s', 0):g} s"
                 + ("; with the fold-back from above Nyquist" if self.info.get("alias_images")
                    else "") + "; declared -> fitted):"]
        # with source components a force's RMS is its floor's and theirs together: the
        # stated level is the total (LoadModel.rms), the floor's own fit next to it
        total = self.model.rms()
        for j, (n, fm, pm) in enumerate(zip(force_names, self.model.forces,
                                            self.prior.forces)):
            key = f"force {j}"
            ok = self.identified.get(key, False)
            hp, lp = fm.orders
            pk = "; peaks " + ", ".join(f"{p[0]:.1f} Hz x{p[2]:.2g}" for p in fm.peaks) \
                if fm.peaks else ""
            # an unidentified level's posterior width is the prior's: not a measurement
            sd = f" +/- {100 * self.posterior_sd[key]:.0f} %" if ok else ""
            level = (f"rms {pm.rms:.3g} -> {total[j]:.3g} (floor {fm.rms:.3g}{sd}, plus the "
                     "components below)" if self.model.components else
                     f"rms {pm.rms:.3g} -> {fm.rms:.3g}" + (f" ({sd.strip()})" if ok else ""))
            lines.append(
                f"  {n}: {level}, band {pm.band[0]:.3g}-{pm.band[1]:.3g} -> {fm.band[0]:.3g}-"
                f"{fm.band[1]:.3g} Hz, roll-off orders {hp}/{lp}, tilt {fm.tilt:+.2f}{pk}"
                + ("" if ok else "  [" + ("floor " if self.model.components else "")
                   + "not identified by the records: the declared size, scaled with the other "
                   "loads to the records' overall level]"))
        n_unc = int(self.model.info.get("uncertainty_components", 0))
        n_pt = len(self.model.components) - n_unc
        for m, c in enumerate(self.model.components[:n_pt]):
            def entry(j, n, x):
                key = f"component {m} {j}"
                sd = self.posterior_sd.get(key)
                return (f"{n} {x:+.3g}" + ("" if sd is None else f" (+/- {sd:.2g})")
                        + ("" if self.identified.get(key, True) else " [not identified]"))
            lines.append(f"  source component {c.f0:.1f} Hz, damping {100 * c.zeta:.1f} %, "
                         "direction " + ", ".join(entry(j, n, x) for j, (n, x) in
                                                  enumerate(zip(force_names, c.v))))
        if n_unc:
            lines.append(f"  (+ {n_unc} component(s) holding the uncertainty of those "
                         "directions: the estimator uses the spectrum expected over it)")
        if self.model.correlated:
            C = self.model.corr
            pairs = [f"{force_names[a]}-{force_names[b]} {C[a, b]:+.2f}"
                     for a in range(C.shape[0]) for b in range(a)]
            lines.append("  correlation of the forces: " + ", ".join(pairs))
        for c, n in enumerate(channel_names):
            key = f"noise {c}"
            pn = self.prior.noise_std[c] if self.prior.noise_std is not None else np.nan
            lines.append(f"  noise {n}: std {pn:.3g} -> {self.model.noise_std[c]:.3g}"
                         + ("" if self.identified.get(key, False) else
                            unidentified_noise(pn, self.model.noise_std[c])))
        return "\n".join(lines)


def _optimise(W, L, theta, free=None, maxiter=200):
    """Minimise the penalised NLL over the ``free`` indices (default all), L-BFGS-B with the
    analytic gradient (:meth:`offline.load.whittle.Whittle.nll_grad`)."""
    opt = need("scipy.optimize")
    theta = np.array(theta, float)
    free = np.arange(L.size) if free is None else np.asarray(free)
    bnds = [L.bounds()[i] for i in free]

    def f(x):
        th = theta.copy()
        th[free] = x
        try:  # a trial step may overflow: it is backed off, not printed as a RuntimeWarning
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                v, g = W.nll_grad(L, th, free)
        except (OverflowError, FloatingPointError, np.linalg.LinAlgError):
            return 1e300, np.zeros_like(x)     # a trial step far outside: the search backs off
        return (v, g) if np.isfinite(v) and np.all(np.isfinite(g)) else (1e300,
                                                                        np.zeros_like(x))

    r = opt.minimize(f, theta[free], jac=True, method="L-BFGS-B", bounds=bnds,
                     options={"maxiter": maxiter})
    theta[free] = r.x
    try:
        return theta, float(W.nll(L, theta))
    except (OverflowError, FloatingPointError, np.linalg.LinAlgError):
        return theta, np.inf


def _force_params(L, j):
    return [i for i, n in enumerate(L.names)
            if n.endswith(str(j)) and n[:-len(str(j))] in ("ln_rms", "ln_flo", "ln_span", "tilt")
            or n.startswith((f"ln_pf{j}_", f"ln_pz{j}_", f"ln_pg{j}_"))]


def _noise_params(L):
    return [i for i, n in enumerate(L.names) if n.startswith("ln_noise")]


def _relayout(prior_models, noise_prior, rate, f_min, fit_corr, models, noise, corr,
              comps=(), declared_below=True):
    """A layout with the orders/peaks of ``models`` and the components ``comps``, and theta
    at them."""
    L = make_layout(prior_models, noise_prior, rate, f_min, fit_corr,
                    orders=[m.orders for m in models], peaks=[m.peaks for m in models],
                    comps=comps, declared_below=declared_below)
    return L, start_theta(L, models, noise, corr, comps)


def _peak_candidate(W, models, noise, corr, j, comps=()):
    """Where the records' expected force-j spectrum most exceeds the model's (E-step ratio):
    ``(f, zeta, gain)`` or None when nowhere by 2x."""
    f_bins, S, M = W.posterior_force_spectra(models, noise, corr, comps)
    peak = peak_of_ratio(f_bins, np.real(M[:, j, j]) / np.maximum(np.real(S[:, j, j]), 1e-300))
    return None if peak is None else (peak[0], peak[1], float(np.sqrt(peak[2])))


def whittle_of_records(mm, records, dt: float, sensor_kinds, seg_s=None, prior=None,
                       alias_share: float = 0.2, alias_bins: float = 0.1, chain=None):
    """The Whittle likelihood of ``records`` (:class:`offline.load.whittle.Whittle`) with the
    full model's transfer functions, its band ``(f_min, f_max)`` [Hz], the Welch segment
    length [samples] and the number of segments.

    The records are samples of the measurement ``chain`` (:class:`edge.acquisition.Chain`;
    None: point samples): each channel's transfer is the structure's times the chain's
    response ``G_c(f)`` (an ADS1256 conversion's sinc filters and delay), in band and at every
    image. A response above the Nyquist frequency folds back into the band. The alias images up to ``2 fs`` (``m fs - f``, ``m fs + f``) enter the likelihood when,
    under the declared load model ``prior`` and its noise, they exceed ``alias_share`` of some
    channel's in-band spectrum plus noise in more than ``alias_bins`` of the bins
    (accelerometers on a stiff structure; a displacement sensor far from its resonances
    barely sees them, and a fold-back the declaration does not predict is better left to
    the in-band shape). Bin by bin, not in total power: a fold-back of 1-2 % of a plate's
    acceleration power lands where its in-band spectrum is low, and read as sensor noise
    there it made the noise 2.5x too high. A channel whose ``chain`` declares a drifting
    offset has its walk's expected Welch estimate in the expectation, fixed at the
    declaration (:mod:`offline.load.walk`): not learned as load or noise."""
    nch = len(sensor_kinds)
    N = segment_length(min(Y.shape[0] for Y in records), dt, seg_s)
    freqs, S_hat, n_seg = cross_spectra(records, dt, N)
    over, hw = 4, 3
    kern = window_kernel(N, over, hw)
    df = freqs[1]
    kmin = hw + 1
    kmax = int(np.floor(0.4 / dt / df))
    f_fine = (kmin - hw) * df + np.arange((kmax - kmin) * over + 2 * hw * over + 1) * df / over
    kinds = [kind_order(k) for k in sensor_kinds]  # derivative order: a gauge reads u
    probes = kinds + [0] * (mm.Phi_out.shape[0] - nch)
    def transfer(f):  # the structure's, through each channel's conversion: G_c(f) H(f)
        Hf = mm.transfer(f, probes)[:, :nch]
        return Hf if chain is None or chain.point else chain.response(f, nch)[:, :, None] * Hf

    H = transfer(f_fine)
    fs = 1.0 / dt
    images = []
    for m in (1, 2):
        images += [(m * fs - f_fine, np.conj(transfer(m * fs - f_fine))),
                   (m * fs + f_fine, transfer(m * fs + f_fine))]
    # Hann bins are correlated with their neighbours: about one independent bin in 1.5
    K_eff = n_seg / 1.5
    S_hat = S_hat[kmin:kmax + 1]
    walk = None if chain is None else walk_spectra(chain.drift_for(nch), N, dt,
                                                   np.arange(kmin, kmax + 1), chain)
    if prior is not None:
        corr = prior.corr if prior.correlated else np.eye(len(prior.forces))
        main = Whittle(f_fine, H, S_hat, kern, over, K_eff, dt, walk=walk)
        full = Whittle(f_fine, H, S_hat, kern, over, K_eff, dt, images, walk)
        ns = np.zeros(nch) if prior.noise_std is None else np.asarray(prior.noise_std, float)
        p_main = np.real(np.einsum("kii->ki", main.expected(prior.forces, ns, corr,
                                                            prior.components)))
        p_all = np.real(np.einsum("kii->ki", full.expected(prior.forces, ns, corr,
                                                           prior.components)))
        # per bin and channel: the images' share of the in-band spectrum plus noise
        visible = (p_all - p_main) > alias_share * np.maximum(p_main, 1e-300)
        if not np.any(np.mean(visible, axis=0) > alias_bins):
            images = []
    W = Whittle(f_fine, H, S_hat, kern, over, K_eff, dt, images, walk)
    return W, (float(kmin * df), float(kmax * df)), N, n_seg


@dataclass
class _Fit:
    """The fit between its steps: the layout ``L``, its parameters ``theta`` and ``-log L``
    (``nll``), what they unpack to, and what every new layout is made of."""
    W: Whittle
    prior_models: list
    noise_prior: np.ndarray
    rate: float
    f_min: float
    fit_corr: bool
    L: object = None
    theta: np.ndarray | None = None
    nll: float = np.inf
    models: list = field(default_factory=list)
    noise: object = None
    corr: object = None
    comps: list = field(default_factory=list)
    declared_below: bool = True  # a declared corner below f_min reachable (corner.py)

    def relayout(self, models, noise, corr, comps=(), fit_corr=None):
        """:func:`_relayout` of this fit's records and prior."""
        return _relayout(self.prior_models, self.noise_prior, self.rate, self.f_min,
                         self.fit_corr if fit_corr is None else fit_corr, models, noise, corr,
                         comps, self.declared_below)

    def take(self, nll, theta, L) -> None:
        """Make ``(nll, theta, L)`` the fit, unpacked."""
        self.nll, self.theta, self.L = nll, theta, L
        self.models, self.noise, self.corr = unpack(L, theta)


def _level_scan(W, L, theta, idx, lo: float, hi: float):
    """``theta`` with the log-levels ``idx`` shifted by the decade offset (step 0.25 decade in
    ``[lo, hi]``) of lowest ``-log L``."""
    best = (np.inf, 0.0)
    for g in np.arange(lo, hi + 0.01, 0.25) * LN10:
        th = theta.copy()
        th[idx] += g
        best = min(best, (W.nll(L, th), g))
    theta[idx] += best[1]
    return theta


def _start(fit: _Fit, noise0, say) -> None:
    """Step 1: the prior's layout at the noise floor, its overall level by a scan."""
    L, theta = fit.relayout(fit.prior_models, noise0, None)
    theta = start_in_records(L, theta, fit.f_min)  # corners from the records' band (corner.py)
    say("level scan")
    rms_idx = [L.index(f"ln_rms{j}") for j in range(len(fit.prior_models))]
    theta = _level_scan(fit.W, L, theta, rms_idx, -6.0, 6.0)
    fit.take(fit.W.nll(L, theta), theta, L)


def _fit_components(fit: _Fit, noise0, max_components: int, say) -> None:
    """Step 2: source components, resonances that drive several forces together, found in the
    forces' spectra the records imply (the structure's resonances divided out) and fitted
    before the forces' own shapes (which would otherwise take up their power); the forces'
    own filters then stay independent (the components carry the coherence). Kept when the
    likelihood rises by more than their cost (BIC)."""
    W, nf = fit.W, len(fit.models)
    if not (nf > 1 and max_components):
        return
    cands = candidates(W, noise0, fit.L.vscale, max_components)
    if not cands:
        return
    say("source components near " + ", ".join(f"{c.f0:.1f}" for c in cands) + " Hz")
    Lt, tt = fit.relayout(fit.prior_models, noise0, np.eye(nf), cands, fit_corr=False)
    # the forces' own level under the components: a scan of their common offset
    tt = _level_scan(W, Lt, tt, [Lt.index(f"ln_rms{j}") for j in range(nf)], -6.0, 2.0)
    levels = [i for i, n in enumerate(Lt.names)
              if n.startswith(("ln_rms", "ln_noise", "ln_cf", "ln_cz", "cv"))]
    tt, v = _optimise(W, Lt, tt, levels, maxiter=100)
    say(f"source components: -log L {v:.6g} against {fit.nll:.6g} without")
    n_eff = W.nb * W.K_eff
    if v < fit.nll - 0.5 * (2 + nf) * len(cands) * np.log(n_eff):
        fit.take(v, tt, Lt)
        fit.comps = components(Lt, tt)
        fit.fit_corr = False


def _fit_orders(fit: _Fit, say) -> None:
    """Step 4: roll-off orders, one force at a time: the low-pass order, then the high-pass
    one, each kept when it lowers ``-log L``."""
    say("roll-off orders")
    for j in range(len(fit.models)):
        for side in ("lp", "hp"):
            best = (fit.nll, fit.theta, fit.L)
            hp0, lp0 = fit.models[j].orders
            for o in (ORDERS_LP if side == "lp" else ORDERS_HP):
                hp, lp = (hp0, o) if side == "lp" else (o, lp0)
                if (hp, lp) == (hp0, lp0):
                    continue
                trial = list(fit.models)
                trial[j] = replace(fit.models[j], order=lp, hp_order=hp, lp_order=lp)
                Lt, tt = fit.relayout(trial, fit.noise, fit.corr, fit.comps)
                tt, v = _optimise(fit.W, Lt, tt, _force_params(Lt, j), maxiter=30)
                if v < best[0]:
                    best = (v, tt, Lt)
            fit.take(*best)


def _fit_peaks(fit: _Fit, max_peaks: int, say) -> None:
    """Step 5: up to ``max_peaks`` resonant peaks of each force, each kept when the likelihood
    rises by more than its cost (BIC: 3 parameters)."""
    W = fit.W
    bic = 0.5 * 3 * np.log(W.nb * W.K_eff)
    for j in range(len(fit.models)):
        for _ in range(max_peaks):
            cand = _peak_candidate(W, fit.models, fit.noise, fit.corr, j, fit.comps)
            if cand is None:
                break
            say(f"peak of force {j + 1} near {cand[0]:.1f} Hz")
            trial = list(fit.models)
            trial[j] = replace(fit.models[j], peaks=fit.models[j].peaks + (cand,))
            Lt, tt = fit.relayout(trial, fit.noise, fit.corr, fit.comps)
            # the new peak and the force's level (the rest follows in the joint fit)
            i = Lt.npeaks[j] - 1
            free = [Lt.index(f"ln_rms{j}")] + [Lt.index(f"{k}{j}_{i}")
                                                for k in ("ln_pf", "ln_pz", "ln_pg")]
            tt, v = _optimise(W, Lt, tt, free, maxiter=40)
            if not v < fit.nll - bic:  # (a NaN is not kept either)
                break
            fit.take(v, tt, Lt)


def _identified(L, cov, n_forces: int, nch: int):
    """Which levels the records tell (posterior sd under half the prior's) and their
    posterior sd: ``(identified, posterior_sd)`` keyed "force j", "noise c", "component m j"."""
    post = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    sd = np.asarray(L.sd)
    ident, psd_ = {}, {}
    for key, name in ([(f"force {j}", f"ln_rms{j}") for j in range(n_forces)]
                      + [(f"noise {c}", f"ln_noise{c}") for c in range(nch)]):
        i = L.index(name)
        ident[key], psd_[key] = bool(post[i] < 0.5 * sd[i]), float(post[i])
    for m in range(L.ncomp):  # a direction entry the records do not tell stays near zero
        for j in range(n_forces):
            i = L.index(f"cv{m}_{j}")
            ident[f"component {m} {j}"] = bool(post[i] < 0.5 * sd[i])
            psd_[f"component {m} {j}"] = float(post[i] * L.vscale[j])
    return ident, psd_


def learn_load(mm, records, dt: float, prior: LoadModel, sensor_kinds, *, seg_s=None,
               max_peaks: int = 3, fit_orders: bool = True, progress=None,
               max_components: int = 4, chain=None, declared_below=True) -> LoadFit:
    """Fit the load model of records (module docstring).

    Parameters
    ----------
    mm : ModalModel of the full model whose first probes are the sensors
    records : list of (n_i, nch) sensor samples;  dt : sample interval [s]
    prior : the declared LoadModel (its ``noise_std`` the declared noise, absolute)
    sensor_kinds : (nch,) signal kinds ("displacement", ...)
    progress : callable(str) or None, told each stage
    chain : edge.acquisition.Chain or None   what one sample is (None: a point sample)
    declared_below : a declared corner below the records' band stays reachable (corner.py)
    """
    say = progress or (lambda s: None)
    nch = len(sensor_kinds)
    n_total = sum(Y.shape[0] for Y in records)
    W, (f_min, f_max), N, n_seg = whittle_of_records(mm, records, dt, sensor_kinds, seg_s,
                                                      prior, chain=chain)
    noise_prior = np.asarray(prior.noise_std, dtype=float)
    fit = _Fit(W=W, prior_models=prior.forces, noise_prior=noise_prior, rate=1.0 / dt,
               f_min=f_min, fit_corr=len(prior.forces) > 1, declared_below=declared_below)
    # 1. noise from the quietest decile of each channel's spectrum; the overall level
    q = np.quantile(np.real(np.einsum("kii->ki", W.S_hat)), 0.1, axis=0)
    noise0 = np.minimum(np.sqrt(np.maximum(q, 1e-300) / dt), 10 * noise_prior)
    _start(fit, noise0, say)
    _fit_components(fit, noise0, max_components, say)  # 2.
    # 3.-5. the forces' own shapes; with source components the forces' own filters are
    # the broadband floor under them: their declared orders are kept and the joint fit
    # sets their levels, corners and tilts (the components carry the peaks)
    if not fit.comps:
        # 3. levels, corners, tilts and noise (independent forces first)
        say("levels, bands and noise")
        free = [i for i, n in enumerate(fit.L.names) if not n.startswith("chol")]
        theta, nll = _optimise(W, fit.L, fit.theta, free)
        fit.take(nll, theta, fit.L)
        if fit_orders:
            _fit_orders(fit, say)  # 4.
        _fit_peaks(fit, max_peaks, say)  # 5.
    # 5b. a second start from the declaration's corners and tilt (a local optimum: restart.py)
    restart_from_declaration(fit, _optimise, say)
    if declared_below:  # a declared corner below the records' band (corner.py)
        keep_declared_corners(fit, _optimise, say)
    # 6. everything jointly (with the correlation of several forces)
    say("joint fit")
    L = fit.L
    theta, nll = _optimise(W, L, fit.theta)
    models, noise, corr = unpack(L, theta)
    comps = components(L, theta)
    cov = np.linalg.inv(W.fisher(L, theta))
    ident, psd_ = _identified(L, cov, len(models), nch)
    info = {"records": len(records), "seconds": n_total * dt, "segments": int(n_seg),
            "segment_s": N * dt, "bins": int(W.nb), "band_hz": [f_min, f_max],
            "alias_images": bool(W.nimg > 1),
            "nll": nll}
    comps, extra = direction_uncertainty(L, cov, comps)
    info["uncertainty_components"] = len(extra)
    fitted = LoadModel(forces=models, corr=corr, noise_std=noise, source="record", info=info,
                       components=comps + extra)
    return LoadFit(model=fitted, prior=prior, identified=ident, posterior_sd=psd_, nll=nll,
                   info={**info, "S_hat": W.S_hat, "freqs": W.bin_freqs(),
                         "whittle": W, "data": records})
