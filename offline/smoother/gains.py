"""The smoother's state-space model (modal coordinates + force models), its exact
discretisation and the steady-state Kalman and fixed-lag smoother gains (Riccati).

With a measurement chain (``bundle.chain`` not ``ideal``, :mod:`edge.acquisition`) the state
is augmented by ``W`` states per channel after the force-model states (``[z, p, m]`` for
``W = 2``), so that the discrete model is exact for the converter's weighted mean over its
window (:mod:`offline.smoother.chain`); without one the design is unchanged (point samples).
Sensor dynamics (a high-pass, a moving average, a drifting offset per channel) add their
states there too (:func:`offline.smoother.chain.sensor_model`): ``[z, r, b, a]``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.bundle import Bundle
from edge.kinds import kind_order
from edge.estimator.operator import EstimatorError, modal_basis
from offline._deps import need
from offline.limit.modal_damping import modal_damping
from offline.model.checks import EIG_ERROR_WARN_PCT
from offline.smoother.chain import chain_model, sensor_model
from offline.smoother.van_loan import van_loan


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
    n_rigid: int = 0          # rigid-body modes anchored (free-free, partly constrained)
    anchor_hz: float = 0.0    # their anchor frequency [Hz] (_anchor_rigid_modes)
    n_chain: int = 0          # measurement-chain states (r, b, W nch) after the force states
    Qd: np.ndarray = None     # the drifting offsets' share of Q (zeros: none)
    walk: np.ndarray = None   # indices of the offset states (random walks; never outputs)
    Ac: np.ndarray = None     # the continuous [modes, forces] system before the chain and its
    Qc: np.ndarray = None     # noise intensity (placement discretises each layout's chain)


def _rows(Phi, w2, Ct, PhiB, Cf, items, ns, drop=None):
    """Rows of H (channels) or of the outputs over the state (see module docstring).
    ``drop`` (n,) bool: modes left out of the acceleration rows (:func:`_misreduced`)."""
    n = Phi.shape[0]
    R = np.zeros((len(items), ns))
    for i, it in enumerate(items):
        if hasattr(it, "row"):
            r = np.asarray(it.row, dtype=float) @ Phi
        else:
            r = Phi[it.dof].copy()
        k = kind_order(it.kind)
        if k == 0:
            R[i, 0:2 * n:2] = r
        elif k == 1:
            R[i, 1:2 * n:2] = r
        else:  # a = Phi (PhiB Cf xi - Ct qd - W2 q)
            if drop is not None:
                r = np.where(drop, 0.0, r)
            R[i, 0:2 * n:2] = -r * w2
            R[i, 1:2 * n:2] = -r @ Ct
            R[i, 2 * n:] = r @ PhiB @ Cf
    return R


def _misreduced(bundle: Bundle, w2) -> np.ndarray:
    """(n,) bool: the reduced modes whose eigenvalue the reduction misses by more than
    ``EIG_ERROR_WARN_PCT`` (1 %, the build's warning) against the full model (the bundle's
    reduction report; a mode the report does not list, or no report: kept). An acceleration
    OUTPUT leaves them out: it weighs a mode by ``omega^2``, and such a mode's shape and
    ``omega^2 q`` are not the structure's, so the output would carry what the estimator makes
    of a mode the structure does not have. On the frame of benchmarks/load_user (500 rows/s)
    GMR+'s 25th reduced mode is at 641 Hz (the full model's at 261 Hz: its residual
    flexibility) and its 21st misses by 4 %: they put the sensors' noise into the unmeasured
    acceleration a1z, 36x its signal. Channels keep every mode (the filter's model of the data
    is unchanged), and so do displacement and velocity outputs (a high mode's static part is
    the residual flexibility). ``meta["reduction"]["accel_modes"] = "all"`` keeps every
    mode (:func:`accel_mode_variants`)."""
    if (getattr(bundle, "meta", None) or {}).get("reduction", {}).get("accel_modes") == "all":
        return np.zeros(len(w2), bool)
    rep = getattr(bundle, "report", None) or {}
    err = np.asarray(rep.get("eig_error", ()), dtype=float)
    fr = np.asarray(rep.get("freqs_reduced", ()), dtype=float)
    out = np.zeros(len(w2), bool)
    if err.size == 0 or fr.size != err.size:
        return out
    f = np.sqrt(np.clip(w2, 0.0, None)) / (2 * np.pi)
    for j, fj in enumerate(f):
        i = int(np.argmin(np.abs(fr - fj)))
        # the report's reduced frequency is this mode's (the same eigenproblem)
        if abs(fr[i] - fj) <= 1e-6 * max(fj, 1e-9) and abs(err[i]) > EIG_ERROR_WARN_PCT:
            out[j] = True
    return out


def accel_mode_variants(bundle: Bundle) -> list:
    """The bundles the estimator choice scores a smoother of: ``bundle`` (misreduced modes
    out of the acceleration outputs, :func:`_misreduced`) and, for a ``"cb+r"`` reduction
    with an acceleration output, the same with ``meta["reduction"]["accel_modes"] = "all"``.
    cb+r's modes past the Craig-Bampton ones are residual vectors whose eigenvalues match no
    mode: the frame of benchmarks/load_user needs them in a1z under an order-8 load model
    (out 8.9x its limit, kept 1.14x); under order 2 they carry the noise (a1z 0.71 / 0.096)."""
    red = (bundle.meta or {}).get("reduction", {})
    if red.get("method") != "cb+r" or not any(kind_order(o.kind) == 2 for o in bundle.outputs):
        return [bundle]
    return [bundle, bundle.replace(meta={**bundle.meta, "reduction": {**red, "accel_modes": "all"}})]


@dataclass
class ModalDynamics:
    """The smoother's continuous structural model in the modal coordinates of the reduced
    model (``q = Phi eta``): the one model of the smoother and the hybrid twin
    (:mod:`offline.hybrid.discrete`). ``w2``, ``Ct`` are the true ones (rows of the channels
    and outputs), ``w2_dyn``, ``Ct_dyn`` the dynamics, with rigid-body modes anchored
    (:func:`_anchor_rigid_modes`; the same as ``w2``, ``Ct`` without rigid modes)."""

    w2: np.ndarray            # (n,) omega^2, rigid modes exactly 0
    Phi: np.ndarray           # (n, n) mass-normalised modes
    Ct: np.ndarray            # (n, n) Phi^T C Phi (diagonal when proportional)
    w2_dyn: np.ndarray
    Ct_dyn: np.ndarray
    proportional: bool
    rigid: np.ndarray         # (n,) bool
    anchor_hz: float = 0.0

    def Ac(self) -> np.ndarray:
        """(2n, 2n) ``[eta_1, eta_1', ..., eta_n, eta_n']' = Ac [...]`` (kernel layout):
        ``eta'' = -W2 eta - Ct eta'`` with the dynamics' ``w2_dyn``, ``Ct_dyn``."""
        n = self.w2.size
        Ac = np.zeros((2 * n, 2 * n))
        for i in range(n):
            Ac[2 * i, 2 * i + 1] = 1.0
            Ac[2 * i + 1, 2 * i] = -self.w2_dyn[i]
        Ac[1::2, 1::2] = -self.Ct_dyn
        return Ac

    def mask(self) -> np.ndarray:
        """(2n, 2n) bool, the 2x2 blocks of the modes (proportional damping: the step matrix
        is exactly 0 outside them; expm leaves round-off there)."""
        n = self.w2.size
        m = np.zeros((2 * n, 2 * n), bool)
        for i in range(n):
            m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = True
        return m


def modal_dynamics(bundle: Bundle, force_models=None, anchor_hz=None) -> ModalDynamics:
    """The structural part of the smoother's continuous model (:class:`ModalDynamics`).
    Rigid-body modes are anchored at ``anchor_hz`` (the smoother's ``meta["estimator"]
    ["rigid_anchor_hz"]``) or, without it, at the frequency the ``force_models`` set
    (:func:`_anchor_rigid_modes`)."""
    w2, Phi = modal_basis(bundle.M, bundle.K)  # rigid-body modes: exactly omega^2 = 0
    c, Ct = modal_damping(Phi, bundle.C)
    proportional = Ct is None
    if proportional:
        Ct = np.diag(c)
    rigid = w2 <= 0.0
    w2_dyn, Ct_dyn, anchor = w2, Ct, 0.0  # the dynamics; rows of H use the true w2, Ct
    if np.any(rigid):
        if anchor_hz is None and force_models is None:
            raise EstimatorError("rigid-body modes: their anchor (the smoother's "
                                 "rigid_anchor_hz) is needed for the dynamics")
        w2_dyn, Ct_dyn, anchor = _anchor_rigid_modes(w2, Ct, rigid, force_models or (),
                                                     anchor_hz=anchor_hz)
    return ModalDynamics(w2=w2, Phi=Phi, Ct=Ct, w2_dyn=w2_dyn, Ct_dyn=Ct_dyn,
                         proportional=bool(proportional), rigid=rigid, anchor_hz=anchor)


def design_smoother(bundle: Bundle, force_models, lag: int, model_error: float = 0.0,
                    corr=None, components=(), chain=None, blind_ok=False) -> SmootherDesign:
    """Steady-state joint input-state fixed-lag smoother of ``bundle``'s reduced model.

    Parameters
    ----------
    bundle : Bundle        M, C, K, dt, channels (weight = 1 / noise variance), forces, outputs
    force_models : list of ForceModel, one per force
    lag : int              smoothing lag L [samples] (delay of the estimates)
    model_error : float    white modal-load noise on every mode at ``model_error^2`` times
                           the forces' band level (process noise for model error; 0 = none)
    corr : (nf, nf), optional   correlation of the forces' driving white noises
                           (:class:`offline.load.LoadModel`; default independent forces)
    components : list of offline.load.model.Component   source modes driving all forces
                           along a direction (a resonator each, its own white noise)
    chain : edge.acquisition.Chain, optional   the measurement chain (default
                           ``bundle.chain``); not ``ideal``: W states per channel
                           (:mod:`offline.smoother.chain`)
    blind_ok : bool        design even when a force is not seen (:func:`blind_forces`: its
                           estimate is the prior's mean, its std the prior's); default: an
                           EstimatorError naming it
    """
    linalg = need("scipy.linalg")
    if lag < 0:
        raise ValueError(f"smoother lag must be >= 0, got {lag}")
    if len(force_models) != len(bundle.forces):
        raise ValueError(f"{len(force_models)} force models for {len(bundle.forces)} forces")
    n = bundle.n
    nf = len(bundle.forces)
    if any(fm.kind == "randomwalk" for fm in force_models) and all(
            c.kind == "acceleration" for c in bundle.channels):
        raise EstimatorError("a random-walk force model with acceleration channels only: the "
                             "force's static part is not observable (the displacement would "
                             "drift); use the bandpass force model")
    md = modal_dynamics(bundle, force_models)
    w2, Phi, Ct, proportional, rigid = md.w2, md.Phi, md.Ct, md.proportional, md.rigid
    B = np.zeros((n, nf))
    for j, f in enumerate(bundle.forces):
        B[f.dof, j] = 1.0
    PhiB = Phi.T @ B
    Af, Bf, Bc, Cf, qc = _force_states(force_models, components, nf)
    nfs = Af.shape[0]
    ns = 2 * n + nfs
    Ac, Qc = _continuous(md, PhiB, (Af, Bf, Bc, Cf, qc), corr, model_error, force_models)
    H = _rows(Phi, w2, Ct, PhiB, Cf, bundle.channels, ns)
    chain = bundle.chain if chain is None else chain
    A, Q, Qd, H, nk, walk = _discretise(bundle, chain, Ac, Qc, H, md)
    Cz = _rows(Phi, w2, Ct, PhiB, Cf, bundle.outputs, ns, drop=_misreduced(bundle, w2))
    Cq = np.vstack([np.hstack([np.zeros((nf, 2 * n)), Cf]), Cz])
    Cq = np.pad(Cq, ((0, 0), (0, nk)))
    R = np.diag(1.0 / np.array([c.weight for c in bundle.channels]))
    P, K, Sinv, G, std, stdf, rho = steady_gains(A, H, Q, R, Cq, lag, linalg, walk=walk)
    blind = blind_forces(bundle, force_models, components, std)
    if blind and not blind_ok:  # the smoothed force is its prior: the sensors see nothing
        raise EstimatorError(f"forces are not identifiable from the sensors (not seen by any "
                             f"channel: {', '.join(blind)}); add a sensor at or near each force")
    return SmootherDesign(A=A, H=H, K=K, Cq=Cq, G=G, Sinv=Sinv, std=std, std_filtered=stdf,
                          Q=Q, R=R, P=P, n_modes=n, n_force_states=nfs,
                          proportional=bool(proportional), lag=int(lag), spectral_radius=rho,
                          n_rigid=int(np.sum(rigid)), anchor_hz=md.anchor_hz, n_chain=nk,
                          Qd=np.zeros_like(Q) if Qd is None else Qd, walk=walk, Ac=Ac, Qc=Qc)


def _force_states(force_models, components, nf: int):
    """The force-model states, block diagonal over the forces, then the source components
    (a resonator each, ``f += v q``, driven by its own unit white noise):
    ``xi' = Af xi + Bf w + Bc wc``, ``f = Cf xi``; ``qc`` the forces' white-noise levels.
    ``(Af, Bf, Bc, Cf, qc)``."""
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
    comp = [c.realise() + (np.asarray(c.v, dtype=float),) for c in components]
    ncs = 2 * len(comp)
    Af = np.pad(Af, ((0, ncs), (0, ncs)))
    Cf = np.pad(Cf, ((0, 0), (0, ncs)))
    Bc = np.zeros((nfs + ncs, len(comp)))
    for m, (a, b, c, v) in enumerate(comp):
        Af[nfs + 2 * m:nfs + 2 * m + 2, nfs + 2 * m:nfs + 2 * m + 2] = a
        Bc[nfs + 2 * m:nfs + 2 * m + 2, m] = b[:, 0]
        Cf[:, nfs + 2 * m:nfs + 2 * m + 2] = np.outer(v, c[0])
    Bf = np.pad(Bf, ((0, ncs), (0, 0)))
    return Af, Bf, Bc, Cf, qc


def _continuous(md: ModalDynamics, PhiB, forces, corr, model_error: float, force_models):
    """The continuous system in the kernel's layout ``[q_1, qd_1, ..., xi]``: ``(Ac, Qc)``."""
    Af, Bf, Bc, Cf, qc = forces
    As = md.Ac()
    n2, nf = As.shape[0], Cf.shape[0]
    ns = n2 + Af.shape[0]
    Ac = np.zeros((ns, ns))
    Ac[:n2, :n2] = As
    Ac[1:n2:2, n2:] = PhiB @ Cf
    Ac[n2:, n2:] = Af
    Qc = np.zeros((ns, ns))
    # E[w w^T] = diag(sqrt qc) rho diag(sqrt qc)   (correlated driving noises)
    rho = np.eye(nf) if corr is None else np.asarray(corr, dtype=float)
    Qw = np.sqrt(qc)[:, None] * rho * np.sqrt(qc)[None, :]
    Qc[n2:, n2:] = Bf @ Qw @ Bf.T + Bc @ Bc.T
    if model_error > 0:
        # q' noise: eps^2 x (modal load level of the forces)        (model error)
        S0 = np.array([fm.level() for fm in force_models])
        Qc[1:n2:2, 1:n2:2] += np.diag(model_error ** 2 * (PhiB ** 2 @ S0))
    return Ac, Qc


def _discretise(bundle: Bundle, chain, Ac, Qc, H, md: ModalDynamics):
    """The sampled system with the measurement chain's states: point samples (Van Loan), the
    conversions' exact model, or the sensors' dynamics (offline/smoother/chain.py).
    ``(A, Q, Qd or None, H, chain states nk, indices of the drifting offsets)``."""
    ns, n2 = Ac.shape[0], 2 * bundle.n
    nch = len(bundle.channels)
    nk, (nr, nb) = chain.n_states(nch, bundle.dt), chain.sensor_states(nch)
    walk = ns + nr + np.arange(nb)
    Qd = None
    if chain.dynamic:  # x = [z, r, b, a]: sensor dynamics (offline/smoother/chain.py)
        A, Q, Qd, H = sensor_model(Ac, Qc, H, bundle.dt, chain, nch)
    elif nk:  # x = [z, a]: exact model of the conversions (offline/smoother/chain.py)
        taps, spacing = chain.taps()
        A, Q, H = chain_model(Ac, Qc, H, bundle.dt, taps, spacing,
                              chain.offsets_for(len(bundle.channels)))
    else:
        A, Q = van_loan(Ac, Qc, bundle.dt)
    # exact zeros (expm round-off) where no force-model state depends on the modes and, with
    # proportional damping, outside each mode's 2x2 block; the chain rows depend on every state
    mask = np.ones((ns + nk, ns + nk), bool)
    mask[:ns, :n2] = False
    mask[:n2, :n2] = md.mask() if md.proportional else True
    A = np.where(mask, A, 0.0)
    return A, Q, Qd, H, nk, walk


def blind_forces(bundle: Bundle, force_models, components, std) -> list:
    """The band-pass forces whose smoothed std is their prior's (above 0.99 of it): the
    sensors say nothing about them, and their estimate is the prior's mean (zero)."""
    nf = len(bundle.forces)
    prior_sd = np.sqrt(np.array([fm.rms ** 2 for fm in force_models])
                       + sum((c.variance() for c in components), np.zeros(nf)))
    return [f.name for f, fm, sd, s0 in zip(bundle.forces, force_models, std, prior_sd)
            if fm.kind == "bandpass" and sd > 0.99 * s0]


def steady_gains(A, H, Q, R, Cq, lag: int, linalg=None, walk=None):
    """Steady-state filter and fixed-lag smoother gains of ``x+ = A x + w (Q)``, ``y = H x + v
    (R)``, for the quantities ``Cq x``: ``(P, K, Sinv, G, std, std_filtered, rho)`` (module
    docstring of :mod:`offline.smoother` and docs/smoother.md for the equations). ``walk``:
    indices of random-walk states (drifting offsets), scaled apart in the Riccati solve."""
    linalg = linalg or need("scipy.linalg")
    # state scaling for the Riccati solve: stationary std of each state (open loop)
    P = _dare(A, H, Q, R, linalg, walk)
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
    G = np.zeros((lag + 1, nq, H.shape[0]))
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
    return P, K, Sinv, G, std, stdf, rho


def _anchor_rigid_modes(w2, Ct, rigid, force_models, ratio: float = 0.01, anchor_hz=None):
    """A weak displacement prior on rigid-body modes (free-free, partly constrained models).

    A rigid mode is a double integrator: its position (and velocity) is not observable from
    accelerations and does not decay, so the Riccati equation has no stabilising solution
    and the estimate would drift. The band-pass force models have no power below their
    high-pass corner ``f_lo`` (Butterworth: ``|H|^2 ~ (f / f_lo)^(2 order)``), so the
    structure's response to them does not need the rigid modes' low-frequency dynamics.
    Each rigid mode becomes a critically damped oscillator at ``w_r = 2 pi ratio f_lo``::

        q_r'' = -w_r^2 q_r - 2 w_r q_r' + phi_r^T B f      (zeta = 1: no overshoot)

    It is a prior on the rigid position and velocity states only: the rows of acceleration
    channels and outputs keep the true ``omega^2 = 0`` (``a_r = phi_r^T B f - Ct q'``), so the
    force is identified from the accelerations without bias, and the anchored states are the
    rigid displacement high-pass filtered at ``w_r`` -- its part below ``w_r`` is not
    observable from accelerations and the force models put no power there. The anchored
    states are stable (eigenvalues inside the unit circle), so the Riccati equation has a
    stabilising solution: no drift, bounded covariance. Their response to a force at ``w``
    is the rigid body's times ``1 / (1 - j w_r / w)^2``, a complex error of about
    ``2 w_r / w`` (2 % at f_lo for ratio 0.01; 0.1 gave a 15 % displacement error on the
    test chain, 0.01 6 %, equal to its stated std), at the price of a slow decay of the
    initial condition (time constant ``1 / w_r``: 3 s for f_lo = 5 Hz).
    ``anchor_hz``: ``w_r / (2 pi)`` given (the smoother's, for the hybrid twin's model).
    Returns ``(w2, Ct, anchor_hz)``.
    """
    if any(fm.kind == "randomwalk" for fm in force_models):
        raise EstimatorError("rigid-body modes with a random-walk force model: a static force "
                             "moves the free structure without bound; use the bandpass force "
                             "model (its high-pass keeps the rigid motion bounded)")
    f_lo = min(float(fm.band[0]) for fm in force_models) if len(force_models) else 1.0
    w_r = 2 * np.pi * (ratio * f_lo if anchor_hz is None else float(anchor_hz))
    w2 = np.where(rigid, w_r ** 2, w2)
    Ct = Ct.copy()
    for r in np.flatnonzero(rigid):
        # damping 2 zeta w_r (zeta = 1) on top of what the model has (e.g. Rayleigh a M)
        Ct[r, r] += 2.0 * w_r
    return w2, Ct, w_r / (2 * np.pi)


def _dare(A, H, Q, R, linalg, walk=None):
    """A-priori steady-state covariance: P = A P A^T - A P H^T (H P H^T + R)^-1 H P A^T + Q.

    Solved on a diagonally scaled state (x = D x~, D = sqrt(diag(X)), X the open-loop
    stationary covariance, X = A X A^T + Q) so that modal and force states of very different
    sizes are balanced; a random-walk force (X unbounded) is scaled by its one-step noise.
    The ``walk`` states (drifting offsets) are left out of ``X`` (the rest held at offset
    0) and scaled by their one-step noise.
    """
    d = np.sqrt(np.clip(np.diag(Q), 0.0, None))
    keep = np.ones(A.shape[0], bool)
    if walk is not None and len(walk):
        keep[np.asarray(walk)] = False
    Ak, Qk = A[np.ix_(keep, keep)], Q[np.ix_(keep, keep)]
    try:
        if np.max(np.abs(np.linalg.eigvals(Ak))) < 1.0 - 1e-12:
            X = linalg.solve_discrete_lyapunov(Ak, Qk)
            d[keep] = np.sqrt(np.clip(np.diag(X), 0.0, None))
    except (np.linalg.LinAlgError, ValueError):
        pass
    top = float(np.max(d)) if d.size and np.max(d) > 0 else 1.0
    d = np.maximum(d, 1e-12 * top)
    Di = 1.0 / d
    At = Di[:, None] * A * d[None, :]
    Ht = H * d[None, :]
    Qt = Di[:, None] * Q * Di[None, :]
    import warnings

    try:
        with warnings.catch_warnings():  # scipy's balancing casts log2(0) = -inf (harmless)
            warnings.filterwarnings("ignore", "invalid value encountered in cast",
                                    RuntimeWarning)
            Pt = linalg.solve_discrete_are(At.T, Ht.T, Qt, R)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise EstimatorError(f"the smoother's Riccati equation has no stabilising solution "
                             f"({exc}); are the forces observable from the sensors?") from None
    P = d[:, None] * Pt * d[None, :]
    return 0.5 * (P + P.T)
