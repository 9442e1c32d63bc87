"""The frequency-domain (Whittle) likelihood of a load model given records, and its
parameters.

Measurements ``y = h_y * f + v`` of a linear structure with stationary Gaussian forces and
white sensor noise have the spectral matrix ``S_yy(f) = H(f) S_ff(f) H(f)^H + diag(s^2) dt``
(two-sided density; ``s_c`` each channel's noise std). Welch's estimate ``S_hat_k`` of ``K``
segments is, per bin, a complex Wishart matrix with ``K`` degrees of freedom and mean
``E_k = (kernel * S_yy)(f_k)`` (:mod:`offline.load.welch`), so up to a constant::

    -log p(S_hat | theta) = K_eff sum_k [ log det E_k + tr(E_k^-1 S_hat_k) ]      (Whittle)

``K_eff`` counts the segments as independent (50 % overlapped Hann segments are nearly so)
and the bins as one per ``bin_corr`` bins (neighbouring Hann bins are correlated). The
declaration enters as a Gaussian prior on the parameters (:class:`Layout`); the maximum of
the posterior is the fit, and the inverse of the Fisher information plus the prior
precision its covariance (Laplace): a parameter whose posterior std is not well below its
prior std is not identified by the records.

Parameters (unconstrained): per force ``ln rms``, ``ln f_lo``, ``ln(f_hi / f_lo)``, ``tilt``
and per peak ``ln f``, ``ln zeta``, ``ln(gain - 1)``; per channel ``ln s``; per pair of
forces an entry of the unnormalised Cholesky factor of the correlation; per source component
(:class:`offline.forcing.component.Component`) ``ln f0``, ``ln zeta`` and its direction
``v_j / vscale_j`` (``vscale_j`` the square root of force j's declared PSD at its band's
centre).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from offline.forcing.component import Component
from offline.load.corner import lowest_corner
from offline.forcing.force_model import ForceModel

LN10 = np.log(10.0)


@dataclass
class Layout:
    """Where each parameter sits in ``theta``, its prior mean and std, its bounds, and the
    discrete structure (Butterworth orders, number of peaks) of each force."""

    names: list = field(default_factory=list)
    mean: list = field(default_factory=list)
    sd: list = field(default_factory=list)
    lo: list = field(default_factory=list)
    hi: list = field(default_factory=list)
    orders: list = field(default_factory=list)     # (hp, lp) per force
    npeaks: list = field(default_factory=list)      # per force
    nf: int = 0
    nch: int = 0
    fit_corr: bool = False
    ncomp: int = 0                                  # source components
    vscale: list = field(default_factory=list)      # per force: unit of a direction entry

    def add(self, name, mean, sd, lo=-np.inf, hi=np.inf):
        self.names.append(name)
        self.mean.append(float(mean))
        self.sd.append(float(sd))
        self.lo.append(float(lo))
        self.hi.append(float(hi))

    def index(self, name) -> int:
        return self.names.index(name)

    @property
    def size(self) -> int:
        return len(self.names)

    def bounds(self):
        return [(None if not np.isfinite(a) else a, None if not np.isfinite(b) else b)
                for a, b in zip(self.lo, self.hi)]

    def prior_penalty(self, theta) -> float:
        z = (np.asarray(theta) - np.asarray(self.mean)) / np.asarray(self.sd)
        return 0.5 * float(z @ z)


def make_layout(prior_models, noise_sd, rate: float, f_min: float, fit_corr: bool,
                orders=None, peaks=None, level_sd=LN10, band_sd=np.log(3.0),
                noise_prior_sd=LN10, comps=(), declared_below: bool = True) -> Layout:
    """Layout with the declaration ``prior_models`` (ForceModel each) and ``noise_sd``
    (nch,) as prior means; ``orders`` ``[(hp, lp)]`` and ``peaks`` ``[[(f, zeta, gain)]]``
    per force (their values are the starting point, their prior is weak).
    ``declared_below``: a declared corner below ``f_min`` stays reachable
    (:mod:`offline.load.corner`); False bounds every corner at ``f_min``."""
    nf = len(prior_models)
    L = Layout(nf=nf, nch=len(noise_sd), fit_corr=fit_corr and nf > 1)
    f_top = 0.45 * rate
    for j, fm in enumerate(prior_models):
        lo, hi = fm.band
        # the declared corner stays reachable (corner.py)
        f_low = lowest_corner(f_min, lo) if declared_below else f_min
        L.add(f"ln_rms{j}", np.log(fm.rms), level_sd)
        L.add(f"ln_flo{j}", np.log(lo), band_sd, np.log(f_low), np.log(0.5 * f_top))
        L.add(f"ln_span{j}", np.log(hi / lo), band_sd, np.log(1.2), np.log(f_top / f_low))
        L.add(f"tilt{j}", fm.tilt, 1.0, -2.0, 2.0)
        L.orders.append(tuple(orders[j]) if orders is not None else fm.orders)
        pk = list(peaks[j]) if peaks is not None else list(fm.peaks)
        L.npeaks.append(len(pk))
        for i, (f0, z, g) in enumerate(pk):
            L.add(f"ln_pf{j}_{i}", np.log(f0), 10.0, np.log(f_min), np.log(f_top))
            L.add(f"ln_pz{j}_{i}", np.log(z), 1.5, np.log(0.002), np.log(0.3))
            L.add(f"ln_pg{j}_{i}", np.log(max(g - 1.0, 1e-3)), 2.0, np.log(0.05), np.log(1e3))
    for c, s in enumerate(noise_sd):
        L.add(f"ln_noise{c}", np.log(s), noise_prior_sd)
    if L.fit_corr:
        for a in range(nf):
            for b in range(a):
                L.add(f"chol{a}_{b}", 0.0, 1.0, -20.0, 20.0)
    L.vscale = [float(np.sqrt(fm.psd([np.sqrt(fm.band[0] * fm.band[1])])[0]))
                for fm in prior_models]
    L.ncomp = len(comps)
    for m, c in enumerate(comps):
        L.add(f"ln_cf{m}", np.log(c.f0), 10.0, np.log(f_min), np.log(f_top))
        L.add(f"ln_cz{m}", np.log(c.zeta), 1.5, np.log(0.002), np.log(0.3))
        for j, sd in enumerate(direction_prior_sd(prior_models, L.vscale, c, len(comps))):
            L.add(f"cv{m}_{j}", 0.0, sd)
    return L


def direction_prior_sd(prior_models, vscale, c: Component, ncomp: int) -> np.ndarray:
    """Each entry's prior std of a component's direction (zero mean), in units of each
    force's declared PSD^1/2 ``vscale_j``: the entry at which the components together carry
    force j's declared variance (``v_j^2 w0 / (4 zeta)`` each, :meth:`Component.variance`),
    or twice the starting entry when that is larger::

        sd_j = max(rms_j / (vscale_j sqrt(ncomp w0 / (4 zeta))), 2 |v_j| / vscale_j)

    Each load its own: a std shared by all entries (set by the largest force's) let a moment
    the records barely see carry, through :func:`offline.load.sources.direction_uncertainty`
    (the posterior second moment of an entry the records do not fix), a resonance of 5-10x
    its declared size (the interface receiver: learned moments 9x too large, their estimates
    23-25x the accuracy limit). A combination of loads that barely moves the sensors stays
    small instead of wandering along the likelihood's flat valley."""
    gain = np.sqrt(max(ncomp, 1) * 2 * np.pi * c.f0 / (4 * c.zeta))
    return np.array([max(fm.rms / (s * gain), 2.0 * abs(x) / s)
                     for fm, s, x in zip(prior_models, vscale, c.v)])


def start_theta(L: Layout, models, noise_sd, corr=None, comps=()) -> np.ndarray:
    """``theta`` of given force models (their orders must match ``L``), noise, corr and
    source components."""
    th = np.array(L.mean, dtype=float)
    for j, fm in enumerate(models):
        th[L.index(f"ln_rms{j}")] = np.log(fm.rms)
        th[L.index(f"ln_flo{j}")] = np.log(fm.band[0])
        th[L.index(f"ln_span{j}")] = np.log(fm.band[1] / fm.band[0])
        th[L.index(f"tilt{j}")] = fm.tilt
        for i, (f0, z, g) in enumerate(fm.peaks[: L.npeaks[j]]):
            th[L.index(f"ln_pf{j}_{i}")] = np.log(f0)
            th[L.index(f"ln_pz{j}_{i}")] = np.log(z)
            th[L.index(f"ln_pg{j}_{i}")] = np.log(max(g - 1.0, 0.05))
    for c, s in enumerate(noise_sd):
        th[L.index(f"ln_noise{c}")] = np.log(s)
    if L.fit_corr and corr is not None:
        C = np.linalg.cholesky(np.asarray(corr) + 1e-9 * np.eye(L.nf))
        C = C / np.diag(C)[:, None]
        for a in range(L.nf):
            for b in range(a):
                th[L.index(f"chol{a}_{b}")] = C[a, b]
    for m, c in enumerate(comps[:L.ncomp]):
        th[L.index(f"ln_cf{m}")] = np.log(c.f0)
        th[L.index(f"ln_cz{m}")] = np.log(c.zeta)
        for j in range(L.nf):
            th[L.index(f"cv{m}_{j}")] = c.v[j] / L.vscale[j]
    return np.clip(th, np.asarray(L.lo) + 1e-9, np.asarray(L.hi) - 1e-9)


def force_model(L: Layout, theta, j: int) -> ForceModel:
    """Force ``j``'s shaping filter of ``theta``."""
    th = theta
    lo = np.exp(th[L.index(f"ln_flo{j}")])
    hi = lo * np.exp(th[L.index(f"ln_span{j}")])
    pk = []
    for i in range(L.npeaks[j]):
        pk.append((float(np.exp(th[L.index(f"ln_pf{j}_{i}")])),
                   float(np.exp(th[L.index(f"ln_pz{j}_{i}")])),
                   float(1.0 + np.exp(th[L.index(f"ln_pg{j}_{i}")]))))
    hp, lp = L.orders[j]
    return ForceModel("bandpass", (float(lo), float(hi)),
                      float(np.exp(th[L.index(f"ln_rms{j}")])), order=int(lp), hp_order=int(hp),
                      lp_order=int(lp), tilt=float(th[L.index(f"tilt{j}")]), peaks=tuple(pk))


def correlation(L: Layout, theta) -> np.ndarray:
    """The forces' correlation matrix of ``theta`` (identity without ``fit_corr``)."""
    if not L.fit_corr:
        return np.eye(L.nf)
    C = np.eye(L.nf)
    for a in range(L.nf):
        for b in range(a):
            C[a, b] = theta[L.index(f"chol{a}_{b}")]
    G = C @ C.T
    d = 1.0 / np.sqrt(np.diag(G))
    return d[:, None] * G * d[None, :]


def components(L: Layout, theta) -> list:
    """The source components of ``theta``."""
    return [Component(float(np.exp(theta[L.index(f"ln_cf{m}")])),
                      float(np.exp(theta[L.index(f"ln_cz{m}")])),
                      tuple(float(theta[L.index(f"cv{m}_{j}")]) * L.vscale[j]
                            for j in range(L.nf)))
            for m in range(L.ncomp)]


def unpack(L: Layout, theta):
    """``(force_models, noise_sd (nch,), corr (nf, nf))`` of ``theta``."""
    th = np.asarray(theta, dtype=float)
    models = [force_model(L, th, j) for j in range(L.nf)]
    noise = np.exp(th[[L.index(f"ln_noise{c}") for c in range(L.nch)]])
    return models, noise, correlation(L, th)


def _owner(name: str):
    """("force", j), ("noise", c) or ("corr", None) of a parameter name."""
    if name.startswith("ln_noise"):
        return "noise", int(name[8:])
    if name.startswith("chol"):
        return "corr", None
    if name.startswith(("ln_cf", "ln_cz")):
        return "comp", int(name[5:])
    if name.startswith("cv"):
        m, j = name[2:].split("_")
        return "compv", (int(m), int(j))
    if name.startswith(("ln_pf", "ln_pz", "ln_pg")):
        return "force", int(name[5:].split("_")[0])
    for k in ("ln_rms", "ln_flo", "ln_span", "tilt"):
        if name.startswith(k):
            return "force", int(name[len(k):])
    raise ValueError(name)


class Whittle:
    """The likelihood of one set of records on fixed frequency grids.

    Parameters
    ----------
    f_fine : (nfine,) [Hz] the fine grid: bin k's kernel covers ``f_fine[k over + j]``,
        ``j = 0 .. len(kernel) - 1``
    H_fine : (nfine, nch, nf) complex, force -> channel transfer functions on it
    S_hat : (nb, nch, nch) Welch estimates at the bins;  kernel : window kernel weights
    over : fine points per bin;  K_eff : effective number of independent averages
    dt : sample interval [s]
    images : ``[(f_m (nfine,), H_m (nfine, nch, nf))]`` the alias images: point samples of
        a response that reaches above the Nyquist frequency ``fs / 2`` see at ``f`` also
        its spectrum at ``f - m fs`` (``S(-f) = conj S(f)``: image ``fs - f`` with
        ``conj H``, image ``fs + f`` with ``H``), so that::

            E(f) = sum_m H_m(f) S_ff(f_m) H_m(f)^H + N

        (the forces' model spectra are real, hence the same at ``-f``)
    walk : (nb, nch) or None, each channel's drifting offset's expected Welch estimate at
        the bins (:func:`offline.load.walk.walk_spectra`), fixed at the declaration and added
        to ``E_k``'s diagonal like the noise (None: no channel drifts)
    """

    def __init__(self, f_fine, H_fine, S_hat, kernel, over, K_eff, dt, images=(), walk=None):
        self.f_fine = np.asarray(f_fine)
        self.H = np.asarray(H_fine)
        self.nfine = self.f_fine.size
        self.nimg = 1 + len(images)
        self.f_all = np.concatenate([self.f_fine] + [np.asarray(f) for f, _ in images])
        self.H_all = np.concatenate([self.H] + [np.asarray(h) for _, h in images])
        self.S_hat = np.asarray(S_hat)
        self.kernel = np.asarray(kernel)
        self.over = int(over)
        self.K_eff = float(K_eff)
        self.dt = float(dt)
        self.nb = self.S_hat.shape[0]
        #: each bin's centre on the fine grid (nb,)
        self.centres = np.arange(self.nb) * self.over + (len(self.kernel) - 1) // 2
        self.walk = None if walk is None else np.asarray(walk, dtype=float)

    def bin_freqs(self) -> np.ndarray:
        """The bins' centre frequencies (nb,) [Hz]."""
        return self.f_fine[self.centres]

    def force_psd(self, models, corr, comps, f, psd=None) -> np.ndarray:
        """S_ff (nfreq, nf, nf) at ``f``: the forces' own filters (their PSDs ``psd``
        (nfreq, nf) when already at hand) and the components."""
        if psd is None:
            psd = np.column_stack([fm.psd(f) for fm in models])
        d = np.sqrt(psd)                                                # (nfreq, nf)
        S = d[:, :, None] * corr[None] * d[:, None, :]
        for c in comps:
            v = np.asarray(c.v)
            S = S + c.h2(f)[:, None, None] * np.outer(v, v)[None]
        return S

    def _fold(self, X):
        """The alias images of ``X`` (nimg * nfine, ...) summed onto the fine grid."""
        return X.reshape((self.nimg, self.nfine) + X.shape[1:]).sum(axis=0)

    def expected(self, models, noise_sd, corr, comps=()) -> np.ndarray:
        """``E_k`` (nb, nch, nch): the model's S_yy smoothed by the window kernel."""
        Sff = self.force_psd(models, corr, comps, self.f_all)
        Syy = self._fold(self.H_all @ Sff @ np.conj(np.transpose(self.H_all, (0, 2, 1))))
        return self._binned(Syy, noise_sd)

    def _binned(self, Syy, noise_sd) -> np.ndarray:
        """``E_k`` of the fine-grid ``S_yy`` (nfine, nch, nch): smoothed by the window kernel
        at the bins, plus the noise ``diag(s^2) dt`` and the drifting offsets' ``diag(walk_k)``;
        Hermitian."""
        E = np.zeros((self.nb,) + Syy.shape[1:], complex)
        idx = np.arange(self.nb) * self.over
        for j, kj in enumerate(self.kernel):
            E += kj * Syy[idx + j]
        E += np.diag(noise_sd ** 2 * self.dt)[None]
        if self.walk is not None:
            E[:, np.arange(E.shape[1]), np.arange(E.shape[1])] += self.walk
        return 0.5 * (E + np.conj(np.transpose(E, (0, 2, 1))))

    def posterior_force_spectra(self, models, noise_sd, corr, comps=()):
        """``(f (nb,), S (nb, nf, nf), M (nb, nf, nf))``: the bins' centre frequencies, the
        model's force spectrum there and the forces' second moment the records imply under
        the model (E-step), per bin::

            G = S H^H E^-1,   M = E[f f^H | y] = S - G H S + G S_hat G^H
        """
        c = self.centres
        f = self.f_fine[c]
        S = self.force_psd(models, corr, comps, f)
        Hb = self.H[c]
        G = S @ np.conj(np.transpose(Hb, (0, 2, 1))) @ np.linalg.inv(
            self.expected(models, noise_sd, corr, comps))
        M = S - G @ Hb @ S + G @ self.S_hat @ np.conj(np.transpose(G, (0, 2, 1)))
        return f, S, M

    def nll_of(self, E) -> float:
        """``K_eff sum_k [log det E_k + tr(E_k^-1 S_hat_k)]``."""
        try:
            Lc = np.linalg.cholesky(E)
        except np.linalg.LinAlgError:
            return np.inf
        logdet = 2.0 * np.sum(np.log(np.real(np.einsum("kii->ki", Lc))))
        X = np.linalg.solve(E, self.S_hat)
        tr = np.sum(np.real(np.einsum("kii->k", X)))
        return self.K_eff * float(logdet + tr)

    def nll(self, L: Layout, theta) -> float:
        models, noise, corr = unpack(L, theta)
        return (self.nll_of(self.expected(models, noise, corr, components(L, theta)))
                + L.prior_penalty(theta))

    def nll_grad(self, L: Layout, theta, free=None, h: float = 1e-6):
        """The penalised NLL and its gradient over the ``free`` indices (default all).

        ``dNLL = K sum_k tr(Gam_k dE_k)`` with ``Gam_k = E_k^-1 - E_k^-1 S_hat_k E_k^-1``;
        through the kernel and ``H`` onto the fine grid, ``Lam_i = H_i^H (sum_j kappa_j
        Gam_k(i,j)) H_i``, and ``dNLL = K sum_i tr(Lam_i dS_ff,i)`` (+ the noise's
        ``K sum_k Gam_k[c,c] d(s_c^2) dt``); ``dS_ff`` of a force's parameter by central
        differences of that force's PSD alone (the costly part stays analytic)."""
        th = np.asarray(theta, dtype=float)
        free = np.arange(L.size) if free is None else np.asarray(free)
        models, noise, corr = unpack(L, th)
        comps = components(L, th)
        f_all, H_all = self.f_all, self.H_all
        psd = np.column_stack([fm.psd(f_all) for fm in models])            # (nall, nf)
        d = np.sqrt(np.maximum(psd, 1e-300))
        Sff = self.force_psd(models, corr, comps, f_all, psd)
        HH = np.conj(np.transpose(H_all, (0, 2, 1)))
        Syy = self._fold(H_all @ Sff @ HH)
        E = self._binned(Syy, noise)
        val = self.nll_of(E)
        if not np.isfinite(val):
            return np.inf, np.zeros(free.size)
        Ei = np.linalg.inv(E)
        Gam = Ei - Ei @ self.S_hat @ Ei                                     # (nb, nch, nch)
        Gf = np.zeros(Syy.shape, complex)
        idx = np.arange(self.nb) * self.over
        for j, kj in enumerate(self.kernel):
            Gf[idx + j] += kj * Gam
        Lam = HH @ np.tile(Gf, (self.nimg, 1, 1)) @ H_all                    # (nall, nf, nf)
        K = self.K_eff
        # g_j(i) = 2 Re sum_b Lam_i[j, b] rho_jb d_i[b]   (dNLL / d d_j at fine point i)
        gd = 2.0 * np.real(np.einsum("ijb,jb,ib->ij", Lam, corr, d))
        grad = np.zeros(free.size)
        for n, p in enumerate(free):
            kind, j = _owner(L.names[p])
            if kind == "force":
                tp, tm = th.copy(), th.copy()
                tp[p] += h
                tm[p] -= h
                dpsd = (force_model(L, tp, j).psd(f_all)
                        - force_model(L, tm, j).psd(f_all)) / (2 * h)
                grad[n] = K * float(np.sum(gd[:, j] * dpsd / (2 * d[:, j])))
            elif kind == "noise":
                grad[n] = K * float(np.sum(np.real(Gam[:, j, j]))) * 2 * noise[j] ** 2 * self.dt
            elif kind == "comp":
                # dS = d|h|^2 v v^T:  dNLL = K sum_i d|h_i|^2 Re(v^T Lam_i v)
                c, v = comps[j], np.asarray(comps[j].v)
                dh = np.zeros(f_all.size)
                for sgn in (1.0, -1.0):
                    x = th[p] + sgn * h
                    cc = (Component(float(np.exp(x)), c.zeta, c.v) if L.names[p].startswith("ln_cf")
                          else Component(c.f0, float(np.exp(x)), c.v))
                    dh += sgn * cc.h2(f_all) / (2 * h)
                grad[n] = K * float(np.sum(dh * np.real(np.einsum("a,iab,b->i", v, Lam, v))))
            elif kind == "compv":
                # dS = |h|^2 (e_j v^T + v e_j^T) vscale_j:  dNLL = 2 K sum_i |h_i|^2 Re(Lam_i v)_j
                m, jj = j
                v = np.asarray(comps[m].v)
                grad[n] = 2 * K * L.vscale[jj] * float(np.sum(
                    comps[m].h2(f_all) * np.real(Lam[:, jj, :] @ v)))
            else:
                tp, tm = th.copy(), th.copy()
                tp[p] += h
                tm[p] -= h
                drho = (correlation(L, tp) - correlation(L, tm)) / (2 * h)
                M = np.einsum("iba,ia,ib->ab", np.real(Lam), d, d)
                grad[n] = K * float(np.sum(M * drho))
        z = (th - np.asarray(L.mean)) / np.asarray(L.sd) ** 2
        return val + L.prior_penalty(th), grad + z[free]

    def fisher(self, L: Layout, theta, h: float = 1e-5) -> np.ndarray:
        """Fisher information of ``theta`` (Wishart: ``K sum_k tr(E^-1 dE_a E^-1 dE_b)``)
        by central differences of ``E``, plus the prior precision."""
        E0 = self.expected(*unpack(L, theta), components(L, theta))
        Ei = np.linalg.inv(E0)
        dE = []
        for a in range(L.size):
            tp, tm = np.array(theta, float), np.array(theta, float)
            tp[a] += h
            tm[a] -= h
            dE.append(Ei @ (self.expected(*unpack(L, tp), components(L, tp))
                            - self.expected(*unpack(L, tm), components(L, tm))) / (2 * h))
        F = np.zeros((L.size, L.size))
        for a in range(L.size):
            for b in range(a + 1):
                F[a, b] = F[b, a] = self.K_eff * float(np.sum(np.real(
                    np.einsum("kij,kji->k", dE[a], dE[b]))))
        return F + np.diag(1.0 / np.asarray(L.sd) ** 2)
