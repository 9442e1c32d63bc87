"""The hybrid model in the smoother's discrete state space: the linear reduced model plus a
neural correction ``g_theta`` held over each sample interval.

Continuous model (modal coordinates of the reduced model, ``q = Phi eta``, as in
:mod:`offline.smoother.gains`)::

    eta'' = -W2 eta - Ct eta' + Phi^T B u + Gm g_theta(s),     s = S x   (network input)

``Gm`` (n, ng): ``Phi^T R^T`` when ``g`` is a force at the physical DOFs of the rows ``R``
(``[hybrid] select``/``dofs``), the unit columns of the lowest modes otherwise. The state
``x = [eta_1, eta_1', ..., eta_n, eta_n']`` is the structural part of the smoother's state
(same layout, same matrix exponential: ``A`` equals the structural block of ``kf_A``).

Discrete (sample interval dt; the force with a first-order hold, the correction with a zero-
order hold of its value at the mid-step free response ``S = S0 exp(Ac dt / 2)``, ``S0`` the
displacements and velocities where it acts; the edge applies it the same way)::

    g_k   = g_theta(S x_k)                              (held over the step k -> k+1)
    x_k+1 = A x_k + B0 u_k + B1 u_k+1 + Bg g_k
    y_k   = H x_k + Du u_k + Dg (g_k + g_k-1) / 2       (an acceleration channel sees g)
    z_k   = Cz x_k + Dzu u_k + Dzg (g_k + g_k-1) / 2    (virtual outputs)

The direct terms see the correction at the instant of the sample, between the hold of the
step before (from the state at k - 1/2) and the one after (k + 1/2): their mean
(:data:`DIRECT`). With ``g_k`` alone an acceleration channel at the correction's DOF sees it
half a step early; on the benchmark (exact cubic law, held-out seeds) the mean took the
unmeasured displacements from 0.004-0.007 NRMSE to 0.0027-0.0033, the linear smoother's
level on the linear structure.

(``Dg``, ``Dzg`` also hold the quasi-static displacement of the modes the correction does not
load, above ``f_max``: :func:`hybrid_model`.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import EstimatorError
from offline._deps import need
from offline.hybrid.conversion import through_chain
from offline.smoother.gains import _rows, modal_dynamics


#: weights of ``g_k`` and ``g_k-1`` in the direct terms (bundle ``kf_hy_direct``)
DIRECT = (0.5, 0.5)


@dataclass
class HybridModel:
    """Matrices of the discrete hybrid model (module docstring); shapes with ``m = 2 n``."""

    A: np.ndarray     # (m, m)
    B0: np.ndarray    # (m, nf)   FOH weight of u_k
    B1: np.ndarray    # (m, nf)   FOH weight of u_k+1
    Bg: np.ndarray    # (m, ng)   ZOH of the correction
    H: np.ndarray     # (nch, m)
    Du: np.ndarray    # (nch, nf)
    Dg: np.ndarray    # (nch, ng)
    Cz: np.ndarray    # (nout, m)
    Dzu: np.ndarray   # (nout, nf)
    Dzg: np.ndarray   # (nout, ng)
    S: np.ndarray     # (ni, m)   network input: [displacements; velocities] at mid-step
    Gm: np.ndarray    # (n, ng)   modal load of a unit correction
    PhiB: np.ndarray  # (n, nf)   modal load of unit forces
    where: str        # "dofs" or "modes"
    nk: int = 0       # conversion states appended to the structural ones (a converter)

    @property
    def n_inputs(self) -> int:
        return int(self.S.shape[0])

    @property
    def n_g(self) -> int:
        return int(self.Bg.shape[1])


def _modal(bundle: Bundle):
    """The smoother's structural model of ``bundle`` (:func:`offline.smoother.gains.
    modal_dynamics`, the same function the smoother's design calls): rigid-body modes
    anchored as the smoother anchored them (``meta["estimator"]["rigid_anchor_hz"]``)."""
    est = bundle.meta.get("estimator") or {}
    anchor = est.get("rigid_anchor_hz") or None
    try:
        return modal_dynamics(bundle, anchor_hz=anchor)
    except EstimatorError as exc:
        raise EstimatorError(f"the hybrid twin: {exc} (build the smoother first)") from None


def _correction_load(md, rows, modes: int, f_max):
    """Where the correction ``g`` acts: its generalised force on the modes ``Gm`` (zero on
    the modes above ``f_max``), the same on every mode ``Gs``, the coordinates the network
    sees ``Sq`` (physical displacement from the modal ones), the modes dropped, and
    ``"dofs"`` or ``"modes"``."""
    n, Phi = md.w2.size, md.Phi
    drop = np.zeros(n, bool)
    if rows is None:
        k = min(int(modes), n)
        Gm = np.eye(n)[:, :k]
        return Gm, None, np.eye(n)[:k], drop, "modes"
    R = np.atleast_2d(np.asarray(rows, dtype=float))
    Gm = Phi.T @ R.T                                  # generalised force of g at R
    Gs = Gm.copy()
    if f_max is not None:  # the correction's load on the modes up to f_max only
        drop = np.sqrt(md.w2_dyn) > 2 * np.pi * f_max
        Gm[drop] = 0.0
    return Gm, Gs, R @ Phi, drop, "dofs"              # physical displacement from eta


def _foh(linalg, Ac, Bc, dt: float):
    """The exact discretisation of ``x' = Ac x + Bc u`` for ``u`` linear over a step (FOH):
    ``exp([[Ac, Bc, 0], [0, 0, I/dt], [0, 0, 0]] dt)``: ``A``, ``Gamma1 = int e^{As} B``,
    ``Gamma2``."""
    m, nb = Bc.shape
    Z = np.zeros((m + 2 * nb, m + 2 * nb))
    Z[:m, :m] = Ac
    Z[:m, m:m + nb] = Bc
    Z[m:m + nb, m + nb:] = np.eye(nb) / dt
    E = linalg.expm(Z * dt)
    return E[:m, :m], E[:m, m:m + nb], E[:m, m + nb:]


def hybrid_model(bundle: Bundle, rows: np.ndarray | None = None, modes: int = 3,
                 inputs=("displacement", "velocity"), f_max: float | None = None) -> HybridModel:
    """The discrete hybrid model of ``bundle``'s reduced model.

    Parameters
    ----------
    bundle : Bundle
        M, C, K, dt, channels, forces, outputs (the smoother's reduced model).
    rows : (ng, n), optional
        Displacement at each physical DOF where the correction acts, from the reduced
        coordinates (rows of the reduction basis T); None: modal coordinates.
    modes : int
        Lowest modes the correction acts on when ``rows`` is None.
    inputs : sequence of {"displacement", "velocity"}
        The network's inputs at those coordinates.
    f_max : float, optional
        A correction at physical DOFs loads only the modes up to ``f_max`` [Hz]
        (:func:`offline.hybrid.attach.max_hz`: half the rate). A mode above the sampled
        band follows a force held over a step poorly, and a stiffening spring's force held
        into it excites it where the structure answers quasi-statically: on the benchmark
        strip (exact cubic law, held-out seeds, direct terms at the sample instant) the
        unmeasured displacements had 0.03-0.05 NRMSE with every mode loaded (up to 5 kHz at
        1 kHz), 0.0026-0.0029 with the modes up to 250 Hz (or 500 Hz: the strip has none
        between 213 and 595 Hz) and 0.0027-0.0035 up to 150 Hz (the strip's second mode, 212
        Hz, answers the spring's harmonics dynamically). The modes above ``f_max`` answer the correction
        quasi-statically: their static displacement ``sum_j phi_j phi_j^T R^T g /
        omega_j^2`` is a direct term of the displacement channels and outputs (``Dg``,
        ``Dzg``; residual flexibility); without it the displacement at 60 mm had 0.0083
        NRMSE, 0.0047 with it (modes up to 150 Hz, direct terms from ``g_k``).
    """
    linalg = need("scipy.linalg")
    n, nf = bundle.n, len(bundle.forces)
    md = _modal(bundle)
    w2, Phi, Ct = md.w2, md.Phi, md.Ct     # true ones: the rows of channels and outputs
    B = np.zeros((n, nf))
    for j, f in enumerate(bundle.forces):
        B[f.dof, j] = 1.0
    PhiB = Phi.T @ B
    Gm, Gs, Sq, drop, where = _correction_load(md, rows, modes, f_max)
    ng = Gm.shape[1]
    m = 2 * n
    # continuous system in the kernel's layout [eta_1, eta_1', ..., eta_n, eta_n']: the
    # smoother's own (modal_dynamics), rigid-body modes anchored as there
    Ac = md.Ac()
    Bc = np.zeros((m, nf + ng))
    Bc[1:m:2, :nf] = PhiB
    Bc[1:m:2, nf:] = Gm
    A, G1, G2 = _foh(linalg, Ac, Bc, bundle.dt)
    # FOH: x+ = A x + (G1 - G2) u_k + G2 u_k+1;  ZOH: x+ = A x + G1 g_k
    B0, B1, Bg = (G1 - G2)[:, :nf], G2[:, :nf], G1[:, nf:]
    if md.proportional:
        A = np.where(md.mask(), A, 0.0)  # exact zeros outside the 2x2 blocks, as kf_A
    if "A" in bundle.kf:  # a smoother bundle: its own step, which the edge runs
        A = _smoother_step(bundle, m)
    Hu = _rows(Phi, w2, Ct, PhiB, np.eye(nf), bundle.channels, m + nf)
    Hg = _rows(Phi, w2, Ct, Gm, np.eye(ng), bundle.channels, m + ng)
    Zu = _rows(Phi, w2, Ct, PhiB, np.eye(nf), bundle.outputs, m + nf)
    Zg = _rows(Phi, w2, Ct, Gm, np.eye(ng), bundle.outputs, m + ng)
    if np.any(drop):  # the modes not loaded answer g quasi-statically (residual flexibility)
        Hg[:, m:] += _static(Phi, w2, Gs, drop, bundle.channels)
        Zg[:, m:] += _static(Phi, w2, Gs, drop, bundle.outputs)
    parts = []
    for kind in inputs:
        Si = np.zeros((ng, m))
        Si[:, 0 if kind == "displacement" else 1:m:2] = Sq   # displacements or velocities
        parts.append(Si)
    S0 = np.vstack(parts)
    # the input at mid-step, x_k+1/2 = exp(Ac dt/2) x_k (free response): a correction held
    # from the step's start lags by dt/2 and feeds energy into a stiffening spring (negative
    # damping ~ (dk / k) omega dt / 4, above a light structural damping); from the midpoint
    # the hold is second order
    S = S0 @ linalg.expm(Ac * (0.5 * bundle.dt))
    hm = HybridModel(A=A, B0=B0, B1=B1, Bg=Bg, H=Hu[:, :m], Du=Hu[:, m:], Dg=Hg[:, m:],
                     Cz=Zu[:, :m], Dzu=Zu[:, m:], Dzg=Zg[:, m:], S=S, Gm=Gm, PhiB=PhiB,
                     where=where)
    if bundle.chain.point:
        return hm
    # a converter: its conversions of the channels (offline/hybrid/conversion.py)
    return through_chain(hm, bundle, Ac, Bc[:, :nf], Bc[:, nf:])


def _smoother_step(bundle: Bundle, m: int) -> np.ndarray:
    """The structural block of the smoother's step ``kf_A`` (the modes come first, then the
    force-model and chain states, :mod:`offline.smoother.gains`): the hybrid's ``A``. The
    smoother's and the hybrid's continuous models are one (:func:`_modal`) and both are
    exponentiated by ``scipy.linalg.expm`` (:func:`offline.smoother.van_loan.van_loan`), so
    the hybrid's own ``A`` is that block to round-off (tests/test_hybrid_structures.py); the
    smoother's is taken so the training runs the step the edge runs. A step that is not a
    smoother's structural block (too small, not finite) is refused."""
    As = np.asarray(bundle.kf["A"], dtype=float)
    if As.ndim != 2 or As.shape[0] < m or As.shape[1] < m or not np.all(np.isfinite(As)):
        raise EstimatorError(f"kf_A of shape {As.shape} is not a smoother's step over the "
                             f"{m} modal states of the reduced model")
    return As[:m, :m].copy()


def _static(Phi, w2, Gs, drop, items):
    """(len(items), ng) quasi-static displacement of the ``drop`` modes under a unit
    correction (their modal loads ``Gs``): the residual flexibility a displacement channel or
    output sees at once; 0 for velocities and accelerations (the static part's rates)."""
    out = np.zeros((len(items), Gs.shape[1]))
    for i, it in enumerate(items):
        if it.kind != "displacement":
            continue
        r = (np.asarray(it.row, dtype=float) @ Phi) if hasattr(it, "row") else Phi[it.dof]
        # u = sum_j phi_j (phi_j^T R^T g) / omega_j^2   over the modes not loaded
        out[i] = (r[drop] / w2[drop]) @ Gs[drop]
    return out


def simulate(hm: HybridModel, U: np.ndarray, g=None, x0=None):
    """The discrete hybrid model driven by ``U`` (nt, nf) (NumPy; ``g``: a function of the
    network input (ni,) -> (ng,), None for the linear model). Returns ``(X, Y, Z)``: states
    (nt, m), channels (nt, nch), outputs (nt, nout)."""
    nt = U.shape[0]
    m = hm.A.shape[0]
    X = np.zeros((nt, m))
    G = np.zeros((nt, hm.n_g))     # g_k, held over the step k -> k+1
    x = np.zeros(m) if x0 is None else np.array(x0, dtype=float)
    for k in range(nt):
        X[k] = x
        if g is not None:
            G[k] = g(hm.S @ x)
        if k + 1 < nt:
            # x_k+1 = A x_k + B0 u_k + B1 u_k+1 + Bg g_k
            x = hm.A @ x + hm.B0 @ U[k] + hm.B1 @ U[k + 1] + hm.Bg @ G[k]
    # gd_k = w0 g_k + w1 g_k-1: the correction at the sample instant (g_-1 = 0, at rest)
    Gd = DIRECT[0] * G + DIRECT[1] * np.vstack([np.zeros((1, hm.n_g)), G[:-1]])
    Y = X @ hm.H.T + U @ hm.Du.T + Gd @ hm.Dg.T
    Z = X @ hm.Cz.T + U @ hm.Dzu.T + Gd @ hm.Dzg.T
    return X, Y, Z
