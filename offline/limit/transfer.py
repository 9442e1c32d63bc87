"""Transfer functions of the FULL FE model and force spectra on a DFT grid.

``H(omega)`` comes from the full sparse model (not the reduced one the estimator uses) by
modal superposition of its lowest ``n_modes`` modes plus the static (residual-flexibility)
response of the modes left out, the same engine that makes the truth of the demo and of the
honest calibration run (:func:`offline.simulate.simulate_modal`)::

    u(omega) = [ sum_i phi_i phi_i^T / (lam_i - omega^2 + i omega c_i)
                 + (K - s M)^-1 - sum_i phi_i phi_i^T / (lam_i - s) ] B f(omega)

with ``c_i = phi_i^T C phi_i`` (the whole ``Phi^T C Phi`` where the damping couples the
modes: :mod:`offline.limit.modal_damping`) and ``s`` the shift of the factorisation (0 for a
grounded model; a negative shift for a free-free one, so the residual term exists with
rigid-body modes). Velocity ``i omega u``, acceleration ``-omega^2 u``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need
from offline.fem.strain import probe_matrix
from offline.limit.modal_damping import coupled_receptance, modal_damping
from offline.limit.wiener import half_weights
from offline.reduction.eigen import max_modes, modes, rigid_count


@dataclass
class ModalModel:
    """Modes of a full model restricted to the DOFs of interest.

    lam (m,) [rad^2/s^2] (rigid modes clamped to 0), c (m,) modal damping [rad/s],
    Phi_in (nin, m), Phi_out (nprobe, m), R (nprobe, nin) residual flexibility [m/N];
    Ct (m, m) the whole ``Phi^T C Phi`` where the damping couples the modes, else None
    (:mod:`offline.limit.modal_damping`).
    """

    lam: np.ndarray
    c: np.ndarray
    Phi_in: np.ndarray
    Phi_out: np.ndarray
    R: np.ndarray
    n_rigid: int = 0
    Ct: np.ndarray | None = None

    def transfer(self, freqs_hz, kinds) -> np.ndarray:
        """``H`` (nfreq, nprobe, nin) complex; ``kinds`` (nprobe,) 0 u, 1 v, 2 a."""
        w = 2 * np.pi * np.asarray(freqs_hz, dtype=float)
        kinds = np.asarray(kinds, dtype=int)
        if self.Ct is not None:  # damping coupling the modes (offline/limit/modal_damping.py)
            Hu = coupled_receptance(self.lam, self.Ct, w, self.Phi_out, self.Phi_in) + self.R[None]
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                # 1 / (lam_i - w^2 + i w c_i) per mode and frequency
                den = 1.0 / (self.lam[None, :] - w[:, None] ** 2
                             + 1j * w[:, None] * self.c[None, :])
            den[~np.isfinite(den)] = 0.0  # rigid modes at omega = 0 (no DC power)
            Hu = np.einsum("pm,km,im->kpi", self.Phi_out, den, self.Phi_in) + self.R[None]
        fac = np.where(kinds[None, :] == 0, 1.0 + 0j,
                       np.where(kinds[None, :] == 1, 1j * w[:, None], -(w[:, None] ** 2)))
        return Hu * fac[:, :, None]


def modal_model(model, in_dofs, out_dofs, n_modes: int = 80) -> ModalModel:
    """Modes + residual flexibility of ``model`` (an :class:`offline.fem.model.FEModel`).

    Parameters
    ----------
    in_dofs : (nin,) int   DOFs the forces act on (unit force each)
    out_dofs : (nprobe,) int  DOFs observed (sensors, outputs); a strain/stress output's
                           :class:`offline.fem.strain.Probe` is its row over the DOFs
    n_modes : int          modes integrated exactly (the rest: static residual)
    """
    N = model.n_dofs
    m = int(max(1, min(n_modes, max_modes(N))))
    md = modes(model.K, model.M, m)
    lam = np.array(md.lam, dtype=float)
    nr = rigid_count(lam)
    lam[:nr] = 0.0  # round-off rigid-body modes are exactly rigid
    Phi = md.Phi
    c, Ct = modal_damping(Phi, model.damping_matrix())
    in_dofs = np.asarray(in_dofs, dtype=int)
    S = probe_matrix(list(out_dofs), N)  # a DOF, or a strain/stress row (offline.fem.strain)
    Phi_out = np.asarray(S @ Phi)
    R = np.zeros((S.shape[0], in_dofs.size))
    if m < N and in_dofs.size:
        s = float(md.factor.sigma) if md.factor is not None else 0.0
        B = np.zeros((N, in_dofs.size))
        B[in_dofs, np.arange(in_dofs.size)] = 1.0
        if md.factor is not None:
            X = md.factor.solve(B)
        else:
            spla = need("scipy.sparse.linalg")
            X = spla.splu((model.K - s * model.M).tocsc()).solve(B)
        # residual flexibility of the omitted modes: (K - s M)^-1 - sum phi phi^T / (lam - s)
        R = np.asarray(S @ X) - (Phi_out / (md.lam - s)) @ Phi[in_dofs].T
    return ModalModel(lam=lam, c=c, Phi_in=Phi[in_dofs], Phi_out=Phi_out, R=R, n_rigid=nr,
                      Ct=Ct)


# ------------------------------------------------------------------------ force spectra
@dataclass(frozen=True)
class ForceSpectrum:
    """Spectrum of one force: ``random`` (flat in ``band`` [Hz], ``rms``), ``sine``
    (``freq`` [Hz], ``amplitude``) or ``none`` (the force is not loaded)."""

    type: str = "random"
    band: tuple | None = None
    rms: float | None = None
    freq: float | None = None
    amplitude: float | None = None

    @property
    def variance(self) -> float:
        if self.type == "random":
            return float(self.rms) ** 2
        if self.type == "sine":
            return 0.5 * float(self.amplitude) ** 2
        return 0.0


def power_per_bin(spec: ForceSpectrum, n: int, dt: float) -> np.ndarray:
    """Two-sided power per one-sided bin of an n-point grid, shape (n // 2 + 1,).

    ``random``: flat over the bins in ``band`` (inclusive, as
    :func:`offline.simulate.load_profile` filters), DC excluded (forces have zero mean);
    ``sine``: the line split between the two nearest bins. Sum over the two-sided grid =
    variance.
    """
    fr = np.fft.rfftfreq(n, dt)
    w = half_weights(n)
    p = np.zeros(fr.size)
    if spec.type == "random":
        lo, hi = spec.band
        sel = (fr >= lo) & (fr <= hi) & (fr > 0)
        if not np.any(sel):
            raise ValueError(f"random load band {lo:g}-{hi:g} Hz holds no bin of the "
                             f"{n}-point grid (resolution {1 / (n * dt):.3g} Hz)")
        p[sel] = spec.variance / np.sum(w[sel])
    elif spec.type == "sine":
        x = spec.freq * n * dt
        k0 = int(np.floor(x))
        a = x - k0
        for k, share in ((k0, 1 - a), (k0 + 1, a)):
            if 0 < k < fr.size and share > 0:
                p[k] += share * spec.variance / w[k]
    elif spec.type != "none":
        raise ValueError(f"force spectrum type must be random, sine or none, got {spec.type!r}")
    return p
