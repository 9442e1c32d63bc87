"""Augmented Kalman filter for force identification (Lourens et al., MSSP 27 (2012) 446-460).

The baseline that paper 004 (Oh et al., Sect. 4.2, Tables 5-6) compares the proposed estimator
with, run on the same reduced model (a :class:`edge.bundle.Bundle`) and the same data.

Model (reduced coordinates u, shape (n,); forces p, shape (nf,), act through S_p (n, nf))::

    M u'' + C u' + K u = S_p p
    x = [u; v],  x' = Ac x + Bc p,   Ac = [[0, I], [-M^-1 K, -M^-1 C]],  Bc = [[0], [M^-1 S_p]]
    y = G x + J p     (displacement/velocity rows pick u/v; acceleration rows are
                       [-M^-1 K, -M^-1 C] with direct feedthrough J = M^-1 S_p)

The unknown forces are a random walk, p_{k+1} = p_k + eta_k, and augment the state,
z = [u; v; p]. Exact zero-order-hold discretisation over the filter step h::

    expm([[Ac, Bc], [0, 0]] h) = [[Ad, Gd], [0, I]] = Phi

Filter (one step of length h)::

    z- = Phi z,  P- = Phi P Phi^T + Q                                  (time update)
    S = H P- H^T + R,  K = P- H^T S^-1                                  (gain)
    z = z- + K (y - H z-)                                               (state update)
    P = (I - K H) P- (I - K H)^T + K R K^T                              (Joseph form)

Filter step and measurements. Measurements come at the bundle's sample interval dt. With
``dt_filter = dt / m`` (m integer) the filter runs m time updates per sample interval:

* ``feed="sample"`` (default): the measurement update happens only at the sample instants;
  between them, m prediction substeps. Noise covariances are given per sample interval and
  spread evenly over the substeps (``Q_step = Q dt_filter / dt``), so every m gives the same
  total random-walk variance per sample. Because the discretisation is exact, the result
  depends on m only through how Q is spread inside the interval (weakly).
* ``feed="interpolate"``: the measurements are linearly interpolated to every filter step and
  an update is made at each, with R multiplied by m (the information per sample interval is
  unchanged for white noise). This mimics paper 004's setting, where the AKF at time step h
  was fed data at the rate 1/h.

Row k of the outputs is the filtered estimate at sample instant t_k = k dt (``z_{k|k}``).
With ZOH, p_k acts on [t_k, t_k+1); with displacement or velocity channels only (J = 0) the
force p_k is not seen by y_k and the filtered force lags by about one sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.bundle import Bundle
from edge.kinds import kind_order
from offline._deps import need, progress as _progress

__all__ = ["AKFModel", "akf_model", "akf_identify", "run_akf", "augmented_transition",
           "collapse_substeps", "kalman_predict", "kalman_update",
           "continuous_state_space"]


# ------------------------------------------------------------------------------- model
def continuous_state_space(M, C, K, force_dof):
    """Continuous first-order model of ``M u'' + C u' + K u = S_p p``.

    Parameters
    ----------
    M, C, K : ndarray, shape (n, n)
        Reduced mass [kg], damping [N s/m], stiffness [N/m] (or consistent generalised units).
    force_dof : array_like of int, shape (nf,)
        Reduced coordinate each force acts on (columns of S_p are unit vectors).

    Returns
    -------
    Ac : ndarray, shape (2n, 2n)
        State matrix for x = [u; v].
    Bc : ndarray, shape (2n, nf)
        Input matrix.
    """
    n = M.shape[0]
    force_dof = np.asarray(force_dof, dtype=int)
    Sp = np.zeros((n, force_dof.size))
    Sp[force_dof, np.arange(force_dof.size)] = 1.0
    MinvK = np.linalg.solve(M, K)
    MinvC = np.linalg.solve(M, C)
    MinvS = np.linalg.solve(M, Sp)
    # Ac = [[0, I], [-M^-1 K, -M^-1 C]]
    Ac = np.block([[np.zeros((n, n)), np.eye(n)], [-MinvK, -MinvC]])
    # Bc = [[0], [M^-1 S_p]]
    Bc = np.vstack([np.zeros((n, force_dof.size)), MinvS])
    return Ac, Bc


def _observation_rows(rows, kinds, Ac, Bc):
    """Rows over z = [u; v; p] of quantities ``row @ (u | v | a)`` by kind (0, 1, 2)."""
    n2, nf = Bc.shape
    n = n2 // 2
    out = np.zeros((len(kinds), n2 + nf))
    for i, (row, kind) in enumerate(zip(rows, kinds)):
        if kind == 0:
            out[i, :n] = row
        elif kind == 1:
            out[i, n:n2] = row
        else:
            # a = -M^-1 K u - M^-1 C v + M^-1 S_p p: acceleration has feedthrough of p
            out[i, :n2] = row @ Ac[n:, :]
            out[i, n2:] = row @ Bc[n:, :]
    return out


def augmented_transition(Ac, Bc, h):
    """Exact ZOH transition of the augmented state over one filter step.

    Parameters
    ----------
    Ac : ndarray, shape (2n, 2n)
    Bc : ndarray, shape (2n, nf)
    h : float
        Filter step [s].

    Returns
    -------
    Phi : ndarray, shape (2n + nf, 2n + nf)
        ``expm([[Ac, Bc], [0, 0]] h)`` = [[Ad, Gd], [0, I]].
    """
    sla = need("scipy.linalg")
    n2, nf = Bc.shape
    Aa = np.zeros((n2 + nf, n2 + nf))
    Aa[:n2, :n2] = Ac
    Aa[:n2, n2:] = Bc
    # Phi = expm(Aa h)
    Phi = sla.expm(Aa * h)
    Phi[n2:, :n2] = 0.0   # exact zeros (expm returns them to roundoff already)
    Phi[n2:, n2:] = np.eye(nf)
    return Phi


@dataclass
class AKFModel:
    """Discrete augmented model for one bundle and filter step.

    Attributes
    ----------
    Phi : ndarray (nz, nz)       transition over one filter step, nz = 2n + nf
    Q : ndarray (nz, nz)         process noise covariance per filter step
    H : ndarray (nch, nz)        measurement rows over z = [u; v; p]
    R : ndarray (nch, nch)       measurement noise covariance (channel units squared)
    Hout : ndarray (nout, nz)    virtual output rows
    P0 : ndarray (nz, nz)        initial covariance (structure at rest, z0 = 0)
    h : float                    filter step [s]
    m : int                      filter steps per sample interval (dt = m h)
    n, nf : int                  reduced DOFs, forces
    feed : str                   "sample" or "interpolate"
    """

    Phi: np.ndarray
    Q: np.ndarray
    H: np.ndarray
    R: np.ndarray
    Hout: np.ndarray
    P0: np.ndarray
    h: float
    m: int
    n: int
    nf: int
    feed: str


def _per_item(value, size, name):
    a = np.asarray(value, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(size, float(a))
    if a.shape != (size,):
        raise ValueError(f"{name}: expected a scalar or shape ({size},), got {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name}: variances must be finite and >= 0, got {a.tolist()}")
    return a


def akf_model(bundle: Bundle, dt_filter=None, q_force=1.0, q_state=0.0, r=None,
              feed: str = "sample") -> AKFModel:
    """Build the discrete augmented model of a bundle (validates all parameters).

    Parameters
    ----------
    bundle : Bundle
        Reduced M, C, K, sample interval ``dt``, channels, forces, outputs.
    dt_filter : float, optional
        Filter step h [s]; ``dt / dt_filter`` must be an integer m >= 1. Default ``dt``.
    q_force : float or array_like (nf,)
        Variance of the force random-walk increment per sample interval [N^2].
    q_state : float or array_like (2n,)
        Variance of the state noise on [u; v] per sample interval [m^2, (m/s)^2].
    r : float or array_like (nch,), optional
        Measurement noise variance per channel [channel unit^2]. Default ``1 / weight`` of
        each channel (the bundle stores weights as inverse noise variances).
    feed : {"sample", "interpolate"}
        How measurements are fed when m > 1 (module docstring).
    """
    b = bundle
    dt = float(b.dt)
    h = dt if dt_filter is None else float(dt_filter)
    if not (np.isfinite(h) and h > 0):
        raise ValueError(f"dt_filter: must be a positive step [s], got {dt_filter}")
    ratio = dt / h
    m = int(round(ratio))
    if m < 1 or abs(ratio - m) > 1e-9 * max(ratio, 1.0):
        raise ValueError(f"dt_filter: {h:g} s must divide the sample interval {dt:g} s an "
                         f"integer number of times (got {ratio:.6g})")
    if feed not in ("sample", "interpolate"):
        raise ValueError(f"feed: {feed!r} is not 'sample' or 'interpolate'")
    n, nf, nch = b.n, len(b.forces), len(b.channels)
    qf = _per_item(q_force, nf, "q_force")
    qx = _per_item(q_state, 2 * n, "q_state")
    if r is None:
        rr = 1.0 / np.array([c.weight for c in b.channels], dtype=float)
    else:
        rr = _per_item(r, nch, "r")
    if np.any(rr <= 0):
        raise ValueError("r: measurement noise variances must be > 0")
    Ac, Bc = continuous_state_space(b.M, b.C, b.K, [f.dof for f in b.forces])
    Phi = augmented_transition(Ac, Bc, h)
    # Q per filter step: the per-sample variances spread over the m steps
    Q = np.diag(np.concatenate([qx, qf]) / m)
    ch_rows = np.eye(n)[[c.dof for c in b.channels]]
    H = _observation_rows(ch_rows, [kind_order(c.kind) for c in b.channels], Ac, Bc)
    out_rows = np.array([o.row for o in b.outputs], dtype=float).reshape(len(b.outputs), n)
    Hout = _observation_rows(out_rows, [kind_order(o.kind) for o in b.outputs], Ac, Bc)
    R = np.diag(rr * (m if feed == "interpolate" else 1))
    # structure at rest: u, v known (zero variance); force unknown by one random-walk step
    P0 = np.diag(np.concatenate([np.zeros(2 * n), qf]))
    return AKFModel(Phi=Phi, Q=Q, H=H, R=R, Hout=Hout, P0=P0, h=h, m=m, n=n, nf=nf, feed=feed)


# ------------------------------------------------------------------------- filter steps
def kalman_predict(z, P, Phi, Q):
    """Time update. z (nz,), P (nz, nz) -> (z-, P-)."""
    # z- = Phi z
    z = Phi @ z
    # P- = Phi P Phi^T + Q
    P = Phi @ P @ Phi.T + Q
    return z, P


def kalman_update(z, P, y, H, R):
    """Measurement update with the Joseph-form covariance.

    Parameters
    ----------
    z : ndarray (nz,), P : ndarray (nz, nz)   prior state and covariance
    y : ndarray (nch,)                         measurement (non-finite entries are skipped)
    H : ndarray (nch, nz), R : ndarray (nch, nch)

    Returns
    -------
    z, P : the posterior state and covariance.
    """
    ok = np.isfinite(y)
    if not np.all(ok):
        if not np.any(ok):
            return z, P
        y, H, R = y[ok], H[ok], R[np.ix_(ok, ok)]
    PHt = P @ H.T
    # S = H P H^T + R
    S = H @ PHt + R
    # K = P H^T S^-1   (S symmetric: solve S K^T = H P)
    K = np.linalg.solve(S, PHt.T).T
    # z = z + K (y - H z)
    z = z + K @ (y - H @ z)
    # P = (I - K H) P (I - K H)^T + K R K^T                               (Joseph form)
    IKH = np.eye(P.shape[0]) - K @ H
    P = IKH @ P @ IKH.T + K @ R @ K.T
    return z, P


def akf_identify(bundle: Bundle, Y, dt_filter=None, q_force=1.0, q_state=0.0, r=None,
                 feed: str = "sample", collapse: bool = False, progress: bool = False,
                 return_P: bool = False):
    """Identify forces and virtual outputs from measurements with the AKF.

    Parameters
    ----------
    bundle : Bundle
        Reduced model, channels, forces, outputs (the estimator's bundle).
    Y : array_like, shape (nt, nch)
        Measurements at the bundle's sample interval, channel units (SI); row k at t = k dt.
        Non-finite values are skipped in the update of that sample.
    dt_filter, q_force, q_state, r, feed
        See :func:`akf_model`.
    collapse : bool
        With ``feed="sample"``, replace the m prediction substeps by one precomputed step
        (Phi^m and the accumulated Q, built by repeated squaring): the same filter up to
        roundoff at the cost of m = 1 (the substep loop is what paper 004 timed).
    progress : bool
        Progress bar over the samples.
    return_P : bool
        Also return the final covariance (for checks).

    Returns
    -------
    F : ndarray, shape (nt, nf)     filtered forces p_{k|k} [N]
    Z : ndarray, shape (nt, nout)   virtual outputs from z_{k|k}
    (P : ndarray (nz, nz)           final covariance, if ``return_P``)
    """
    nch = len(bundle.channels)
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != nch:
        raise ValueError(f"Y: expected shape (nt, {nch}) for channels "
                         f"{[c.name for c in bundle.channels]}, got {Y.shape}")
    mod = akf_model(bundle, dt_filter=dt_filter, q_force=q_force, q_state=q_state, r=r,
                    feed=feed)
    if collapse and mod.feed == "sample" and mod.m > 1:
        mod = collapse_substeps(mod)
    F, Z, P = run_akf(mod, Y, progress=progress)
    return (F, Z, P) if return_P else (F, Z)


def collapse_substeps(mod: AKFModel) -> AKFModel:
    """The model with its m time updates per sample merged into one (``feed="sample"``).

    Composition of two time updates (Phi1, Q1) then (Phi2, Q2) is
    (Phi2 Phi1, Phi2 Q1 Phi2^T + Q2); m of them are combined by repeated squaring.
    """
    if mod.feed != "sample":
        raise ValueError("feed: only 'sample' substeps (no update in between) can be collapsed")
    Phi_acc, Q_acc = None, None          # accumulated result
    Phi_p, Q_p = mod.Phi, mod.Q           # (Phi, Q) of 2^j substeps
    m = mod.m
    while m:
        if m & 1:
            if Phi_acc is None:
                Phi_acc, Q_acc = Phi_p, Q_p
            else:
                # later steps act after the earlier ones; all blocks commute (same Phi)
                Q_acc = Phi_p @ Q_acc @ Phi_p.T + Q_p
                Phi_acc = Phi_p @ Phi_acc
        m >>= 1
        if m:
            Q_p = Phi_p @ Q_p @ Phi_p.T + Q_p
            Phi_p = Phi_p @ Phi_p
    from dataclasses import replace

    return replace(mod, Phi=Phi_acc, Q=Q_acc, h=mod.h * mod.m, m=1)


def run_akf(mod: AKFModel, Y, progress: bool = False):
    """Run the filter of a prepared :class:`AKFModel` over measurements Y (nt, nch).

    Returns F (nt, nf), Z (nt, nout) and the final covariance P (nz, nz); see
    :func:`akf_identify` for the meaning of the rows.
    """
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != mod.H.shape[0]:
        raise ValueError(f"Y: expected shape (nt, {mod.H.shape[0]}), got {Y.shape}")
    nt = Y.shape[0]
    n2 = 2 * mod.n
    z = np.zeros(n2 + mod.nf)
    P = mod.P0.copy()
    F = np.empty((nt, mod.nf))
    Z = np.empty((nt, mod.Hout.shape[0]))
    Phi, Q, H, R, m = mod.Phi, mod.Q, mod.H, mod.R, mod.m
    interp = mod.feed == "interpolate" and m > 1
    it = _progress(range(nt), total=nt, desc=f"AKF h={mod.h:g} s", enable=progress)
    for k in it:
        if k > 0:
            for j in range(1, m):
                z, P = kalman_predict(z, P, Phi, Q)
                if interp:
                    # linear interpolation of the measurements to the filter step
                    w = j / m
                    z, P = kalman_update(z, P, (1 - w) * Y[k - 1] + w * Y[k], H, R)
            z, P = kalman_predict(z, P, Phi, Q)
        z, P = kalman_update(z, P, Y[k], H, R)
        F[k] = z[n2:]
        Z[k] = mod.Hout @ z
    return F, Z, P
