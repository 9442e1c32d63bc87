"""The error a layout's smoother makes on the build's calibration runs, predicted: the
steady-state fixed-lag smoother the build designs (its reduced model, force models, lag,
noise) run on the FULL model under the ``[design_load]`` load, in the frequency domain.

The smoother's model (a band-pass force model of order 2 by default) is not the load of the
calibration runs (an ideal band): the smoother's own stated error is the error under its
model, not the one the build measures and ships on. As a linear time-invariant filter from
the measurements to the estimate of the targets ``L`` samples back it is (predictor form,
``x_{k+1} = A x_k + A K nu_k``, ``nu_k = y_k - H x_k``, docs/smoother.md)::

    T(z)  = (zI - Abar)^-1 A K,   Abar = A (I - K H)
    F(z)  = Cq T(z) + sum_{j=0..L} G_j z^j (I - H T(z)),   G_j = Cq P (Abar^T)^j H^T S^-1

(``F`` aligned with the truth ``L`` samples back). With the full model's transfer functions
``Hy(w)`` (sensors) and ``Hz(w)`` (forces: identity; outputs), the load's power ``P_k`` per bin
and white noise ``R`` (``R / n`` per bin of an n-point grid, as :mod:`offline.limit.wiener`)::

    E_k = Hz - F Hy,   err_q = sum_k w_k [E_k P_k E_k^H + F R F^H / n]_qq

``w_k``: the one-sided bins' weights; ``NRMSE_q = sqrt(err_q / var_q)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.kinds import kind_order
from offline.limit.model import _power, force_spectra
from offline.limit.transfer import modal_model
from offline._deps import need
from offline.limit.wiener import half_weights

#: grid of the frequency-domain evaluation (2^13 points: 0.12 Hz at 1 kHz, 5 bins within
#: the half-power band of a 1 %-damped mode at 30 Hz)
N_GRID = 2 ** 13


@dataclass
class LoadGrid:
    """The calibration load on the full model at the signals' DOFs, one-sided bins.

    Hc : (nb, ncand, nf) candidates;  Hs : (nb, nfix, nf) fixed sensors;  Hz : (nb, nq, nf)
    forces (identity) then outputs;  P : (nb, nf) or (nb, nf, nf) force power per bin;
    w : (nb,) bin weights;  z : (nb,) ``e^(j 2 pi f dt)``;  n : grid length;
    var_c : (ncand,), var_s : (nfix,) stationary variance of each candidate / sensor;
    var_q : (nq,) of each target
    """

    Hc: np.ndarray
    Hs: np.ndarray
    Hz: np.ndarray
    P: np.ndarray
    w: np.ndarray
    z: np.ndarray
    n: int
    var_c: np.ndarray
    var_s: np.ndarray
    var_q: np.ndarray


def load_grid(spec, model, force_dofs, sens, cand, outs, dt: float,
              n: int = N_GRID) -> LoadGrid:
    """``sens``, ``cand``, ``outs``: lists of (FE DOF, kind) of the fixed sensors, the
    candidates and the outputs; the load: ``force_spectra(spec)`` (the calibration runs')."""
    probes = list(sens) + list(cand) + list(outs)
    mm = modal_model(model, list(force_dofs), [d for d, _ in probes])
    fr = np.fft.rfftfreq(n, dt)
    H = mm.transfer(fr, [kind_order(k) for _, k in probes])      # (nb, nprobe, nf)
    P = _power(force_spectra(spec), n, dt)
    w = half_weights(n)
    ns_, nc = len(sens), len(cand)
    nf = len(force_dofs)
    Hz = np.concatenate([np.broadcast_to(np.eye(nf), (fr.size, nf, nf)),
                         H[:, ns_ + nc:]], axis=1)

    def var(G):
        if P.ndim == 2:
            return w @ np.einsum("kcj,kj->kc", np.abs(G) ** 2, P)
        return w @ np.real(np.einsum("kcj,kjl,kcl->kc", G, P, np.conj(G)))

    return LoadGrid(Hc=H[:, ns_:ns_ + nc], Hs=H[:, :ns_], Hz=Hz, P=P, w=w,
                    z=np.exp(2j * np.pi * fr * dt), n=n, var_c=var(H[:, ns_:ns_ + nc]),
                    var_s=var(H[:, :ns_]), var_q=var(Hz))


def smoother_nrmse(A, H, R, P, Cq, lag: int, Hy, grid: LoadGrid) -> np.ndarray:
    """Normalised RMS error (nq,) of the steady-state fixed-lag smoother of a-priori
    covariance ``P`` (channels ``H``, noise ``R`` (m, m)) on ``grid``'s load, ``Hy`` (nb, m,
    nf) the channels' full-model transfer functions (module docstring)."""
    m = H.shape[0]
    S = H @ P @ H.T + R
    Sinv = np.linalg.inv(0.5 * (S + S.T))
    K = P @ H.T @ Sinv
    AK = A @ K
    Abar = A - AK @ H
    # G_j = Cq P (Abar^T)^j H^T S^-1, j = 0..L; Gs(z) = sum_j G_j z^j
    Z = P @ Cq.T
    Gs = np.zeros((grid.z.size, Cq.shape[0], m), dtype=complex)
    zj = np.ones_like(grid.z)
    for _ in range(lag + 1):
        Gj = (H @ Z).T @ Sinv                                       # (nq, m)
        Gs += zj[:, None, None] * Gj[None]
        Z = Abar @ Z
        zj = zj * grid.z
    CqT, HT = _transfers(Abar, AK, Cq, H, grid.z)                   # (nb, nq|m, m)
    F = CqT + Gs - Gs @ HT                                          # (nb, nq, m)
    E = grid.Hz - F @ Hy                                            # (nb, nq, nf)
    if grid.P.ndim == 2:
        ef = np.einsum("kqj,kj->kq", np.abs(E) ** 2, grid.P)
    else:
        ef = np.real(np.einsum("kqj,kjl,kql->kq", E, grid.P, np.conj(E)))
    en = (np.abs(F) ** 2 @ np.diag(R)) / grid.n                    # R diagonal
    err = grid.w @ (ef + en)
    return np.sqrt(np.clip(err / grid.var_q, 0.0, None))


def _transfers(Abar, AK, Cq, H, z, schur=None):
    """``Cq T(z)`` and ``H T(z)``, ``T(z) = (zI - Abar)^-1 A K``, on the bins ``z``: by the
    eigendecomposition ``Abar = V diag(lam) V^-1`` where ``V`` is well conditioned, else (a
    measurement chain's conversion states: a nilpotent shift, Jordan blocks at 0) by the
    complex Schur form ``Abar = U T U^H`` and back substitution over all bins at once
    (``schur``: True / False forces one way, None chooses)::

        (zI - T) x = U^H A K:   x_i = (b_i + sum_{j>i} T_ij x_j) / (z - T_ii)
    """
    lam, V = np.linalg.eig(Abar)
    if not schur and (schur is False or np.linalg.cond(V) < 1e8):
        Vi_AK = np.linalg.solve(V, AK)                              # (ns, m)
        r = 1.0 / (z[:, None] - lam[None, :])                       # (nb, ns)
        # Cq T(z) = (Cq V) diag(1 / (z - lam)) V^-1 A K, the same for H T(z)
        return (((Cq @ V)[None] * r[:, None, :]) @ Vi_AK,
                ((H @ V)[None] * r[:, None, :]) @ Vi_AK)
    T, U = need("scipy.linalg").schur(Abar, output="complex")
    B = U.conj().T @ AK
    ns = T.shape[0]
    X = np.zeros((z.size, ns, B.shape[1]), dtype=complex)
    for i in range(ns - 1, -1, -1):
        acc = B[i][None, :] + np.einsum("j,kjm->km", T[i, i + 1:], X[:, i + 1:, :])
        X[:, i, :] = acc / (z - T[i, i])[:, None]
    return (Cq @ U)[None] @ X, (H @ U)[None] @ X
