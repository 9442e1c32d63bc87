"""A cheap ranking of candidates for the search: the error of the non-causal Wiener smoother
of the same structure, load model and noise, in the frequency domain.

With the forces' spectra ``S_f(w)`` (the force models, independent forces), the candidates'
receptances ``t_c(w)`` (1, nf) and noise variances ``r_c``, write ``g_c = t_c S_f^1/2``.
For a layout J the information matrix per frequency and the error spectrum of a target z
(``g_z`` its response to the whitened forces) are::

    M_J(w) = I + sum_{c in J} g_c^H g_c / (r_c dt)               (nf, nf)
    e_z(w) = g_z M_J^-1 g_z^H,   proxy NRMSE_z^2 = int e_z dw / int |g_z|^2 dw

(the infinite-lag limit of the fixed-lag smoother; sampled white noise of variance r_c has
the two-sided PSD r_c dt). Adding one candidate is a rank-one
update (Sherman-Morrison), so every candidate of a step is ranked at once. The search
evaluates only the best few by the exact Riccati criterion
(:meth:`offline.placement.criterion.PlacementModel.nrmse`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.estimator.operator import modal_basis
from edge.kinds import kind_order


@dataclass
class Screen:
    """Whitened responses on a frequency grid.

    gc : (ncand, nw, nf) candidates, scaled by 1/sqrt(r_c);  gs : (nfix, nw, nf) the fixed
    sensors, same scaling;  gz : (nq, nw, nf) targets;  dw : (nw,) integration weights.
    """

    gc: np.ndarray
    gs: np.ndarray
    gz: np.ndarray
    dw: np.ndarray

    def info(self, layout) -> np.ndarray:
        """``M_J(w)`` (nw, nf, nf) of the fixed sensors plus ``layout``."""
        nw, nf = self.gz.shape[1], self.gz.shape[2]
        M = np.broadcast_to(np.eye(nf), (nw, nf, nf)).astype(complex)
        for g in list(self.gs) + [self.gc[i] for i in layout]:
            M = M + np.conj(g)[:, :, None] * g[:, None, :]
        return M

    def value(self, layout, weights, linear: bool = False) -> float:
        """Proxy criterion of ``layout`` itself."""
        Mi = np.linalg.inv(self.info(list(layout)))
        e = np.einsum("qwa,wab,qwb->qw", self.gz, Mi, np.conj(self.gz)).real
        var0 = np.einsum("qwa,qwa,w->q", self.gz, np.conj(self.gz), self.dw).real
        nr = np.sqrt(np.clip(e @ self.dw / var0, 1e-300, 1.0))
        w = np.asarray(weights, float)
        return float((nr @ w if linear else np.log(nr) @ w) / w.sum())

    def scores(self, layout, weights, linear: bool = False, drop=None) -> np.ndarray:
        """Proxy criterion of ``layout`` (minus ``drop``) plus each candidate, (ncand,)."""
        keep = [i for i in layout if i != drop]
        Mi = np.linalg.inv(self.info(keep))                    # (nw, nf, nf)
        # Sherman-Morrison: (M + g^H g)^-1 = Mi - Mi g^H g Mi / (1 + g Mi g^H)
        u = np.einsum("wab,cwb->cwa", Mi, np.conj(self.gc))     # Mi g^H (ncand, nw, nf)
        den = 1.0 + np.einsum("cwa,cwa->cw", self.gc, u).real
        zu = np.einsum("qwa,wab->qwb", self.gz, Mi)              # g_z Mi
        base = np.einsum("qwb,qwb->qw", zu, np.conj(self.gz)).real
        gzu = np.einsum("qwa,cwa->cqw", self.gz, u)              # g_z Mi g_c^H
        e = base[None] - np.abs(gzu) ** 2 / den[:, None, :]     # (ncand, nq, nw)
        var0 = np.einsum("qwa,qwa,w->q", self.gz, np.conj(self.gz), self.dw).real
        nr = np.sqrt(np.clip(e @ self.dw / var0, 1e-300, 1.0))
        w = np.asarray(weights, float)
        return (nr @ w if linear else np.log(nr) @ w) / w.sum()


def screen(pm, n_freq: int = 4000) -> Screen:
    """The proxy of :class:`~offline.placement.criterion.PlacementModel` ``pm``: with its
    calibration load (``pm.grid``, the full model under the load the build scores on) the
    non-causal limit of that load, as the criterion; else of its reduced model and force
    models."""
    if getattr(pm, "grid", None) is not None:
        return _grid_screen(pm)
    rm = pm.rm
    M, K, C = rm.reduction.M, rm.reduction.K, rm.C
    w2, Phi = modal_basis(M, K)
    ct = np.diag(Phi.T @ C @ Phi)
    fms = pm.force_models
    rate = 1.0 / pm.dt
    wmax = np.pi * rate
    # grid: uniform up to Nyquist plus points within the half-power band of every mode
    w = np.linspace(0.0, wmax, n_freq + 1)[1:]
    wn = np.sqrt(np.clip(w2, 0.0, None))
    z = ct / np.maximum(2 * wn, 1e-12)
    extra = (wn[:, None] * (1 + np.clip(z, 1e-4, 0.2)[:, None] * np.linspace(-3, 3, 25)))
    w = np.unique(np.concatenate([w, extra[(extra > 0) & (extra < wmax)]]))
    dw = np.gradient(w)
    B = rm.force_matrix()                                     # (n, nf)
    # receptance: X(w) = Phi diag(1 / (w_i^2 - w^2 + j w c_i)) Phi^T B   (modal damping)
    h = 1.0 / (w2[None, :] - w[:, None] ** 2 + 1j * w[:, None] * ct[None, :])
    PB = Phi.T @ B
    S = np.stack([_force_psd(fm, w) for fm in fms], axis=1)  # (nw, nf)
    sq = np.sqrt(S)

    def resp(rows, kinds):
        rP = rows @ Phi                                       # (k, n)
        g = np.einsum("kn,wn,nf->kwf", rP, h, PB)
        p = np.array([kind_order(k) for k in kinds])
        g = g * (1j * w[None, :, None]) ** p[:, None, None]
        return g * sq[None]

    # sampled white noise of variance r: two-sided PSD r dt on |w| < pi / dt
    gc = resp(pm.cand_rows, pm.cand_kinds) / np.sqrt(pm.rc * pm.dt)[:, None, None]
    gs = resp(pm.sens_rows, pm.sens_kinds) / np.sqrt(pm.rs * pm.dt)[:, None, None] \
        if len(pm.rs) else np.zeros((0, w.size, len(fms)))
    nf = len(fms)
    gz = [np.eye(nf)[j][None, :] * sq for j in range(nf)]
    if len(pm.out_rows):
        gz += list(resp(pm.out_rows, pm.out_kinds))
    return Screen(gc=gc, gs=gs, gz=np.array(gz), dw=dw)


def _grid_screen(pm) -> Screen:
    """The proxy on :class:`offline.placement.honest.LoadGrid`: ``g = H sqrt(P_k)`` per
    one-sided bin of the n-point grid, white noise ``r / n`` per bin (as
    :func:`offline.limit.wiener.wiener_limit`), bin weights ``w_k``."""
    g = pm.grid
    if g.P.ndim != 2:  # pragma: no cover - the declared load's forces are independent
        raise ValueError("the placement proxy needs independent forces")
    sq = np.sqrt(g.P)                                          # (nb, nf)

    def white(H, r):
        return np.transpose(H, (1, 0, 2)) * sq[None] / np.sqrt(np.asarray(r) / g.n)[:, None,
                                                                                     None]

    gz = np.transpose(g.Hz, (1, 0, 2)) * sq[None]
    return Screen(gc=white(g.Hc, pm.rc), gs=white(g.Hs, pm.rs), gz=gz, dw=g.w)


def _force_psd(fm, w) -> np.ndarray:
    """PSD of a force model on ``w`` [rad/s] (up to a constant): ``qc |Cf (jwI - Af)^-1 Bf|^2``."""
    Af, Bf, Cf, qc = fm.realise()
    eye = np.eye(Af.shape[0])
    hf = np.array([(Cf @ np.linalg.solve(1j * x * eye - Af, Bf))[0, 0] for x in w])
    return qc * np.abs(hf) ** 2
