"""Model reduction: Guyan, Craig-Bampton, GMR+ (paper 004 Sect. 2, eq. 2-6) and CB+R (CB with
GMR+'s residual vectors as coordinates of their own: :func:`.gmr.residual_vectors`).

>>> red = reduce(model, masters, n_modes=50, method="gmr+")      # doctest: +SKIP
>>> red.M, red.K, red.T          # (n, n), (n, n), (N, n); n = len(masters) + n_modes
>>> print(red.report.format())   # full vs reduced frequencies, eq. 31 error, timings

Reduced coordinates are ``u_hat = [u_m (masters in the given order), q_s (slave modal
coordinates)]`` and ``u_full ~ T @ u_hat``; a physical DOF ``i`` is ``T[i] @ u_hat``
(:func:`recover` returns such rows for output maps). The first ``Nm`` columns of ``T`` have
``T[masters[j], j] = 1`` and are zero on the other masters.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np

from edge.kinds import REDUCTION_METHODS
from offline._deps import need
from offline._deps import progress as _progress

from .craig_bampton import craig_bampton_basis
from .eigen import modes
from .flexibility import Flexibility
from .gmr import gmr_correction, residual_vectors
from .guyan import constraint_modes, guyan_basis
from .partition import partition
from .projection import project, reduced_stiffness
from .report import ReductionReport, eigenvalue_error, frequencies, plot_reports

__all__ = ["reduce", "recover", "Reduction", "ReductionReport", "plot_reports", "METHODS"]

#: Accepted ``method`` names.
METHODS = REDUCTION_METHODS

#: BLAS threads during :func:`reduce` (None: leave as is). The dense products here are thin
#: (N x n with n ~ 100): one thread does them in well under a second, while OpenBLAS's
#: threads on a loaded 2-core machine slowed the 200k-DOF benchmark from 34 s to 112 s.
BLAS_THREADS: int | None = 1


@dataclass
class Reduction:
    """A reduced model ``M_hat u_hat'' + K_hat u_hat = T^T f`` (eq. 6).

    Attributes
    ----------
    method : str
        ``"gmr+"``, ``"cb+r"``, ``"cb"`` or ``"guyan"``.
    M, K : ndarray, shape (n, n)
        Reduced mass [kg] and stiffness [N/m], exactly symmetric, ``n = Nm + n_modes``
        (``"cb+r"``: plus up to Nm residual coordinates).
    T : ndarray, shape (N, n)
        Transformation ``u_full ~ T u_hat`` (rows in model DOF order).
    masters : ndarray of int64, shape (Nm,)
        Master DOF indices into the model, in the order of the reduced coordinates.
    n_modes : int
        Slave modal coordinates kept (0 for Guyan).
    report : ReductionReport
        Eigenvalue comparison with the full model and timings.
    """

    method: str
    M: np.ndarray
    K: np.ndarray
    T: np.ndarray
    masters: np.ndarray
    n_modes: int
    report: ReductionReport

    @property
    def n(self) -> int:
        """Number of reduced coordinates."""
        return int(self.M.shape[0])


def recover(T: np.ndarray, rows) -> np.ndarray:
    """Output rows mapping reduced coordinates to physical DOFs.

    Parameters
    ----------
    T : ndarray, shape (N, n)
        Reduction transformation.
    rows : int or array of int, shape (r,)
        Physical DOF indices (into the model's DOFs).

    Returns
    -------
    ndarray, shape (r, n)
        ``R`` with ``u_full[rows] ~ R @ u_hat`` (also for velocities and accelerations).
    """
    T = np.asarray(T)
    if T.ndim != 2:
        raise ValueError(f"T: expected a 2-D array, got shape {T.shape}")
    r = np.atleast_1d(np.asarray(rows))
    if r.ndim != 1 or not np.issubdtype(r.dtype, np.integer):
        raise ValueError(f"rows: expected integer DOF indices, got {r.dtype} {r.shape}")
    bad = r[(r < 0) | (r >= T.shape[0])]
    if bad.size:
        raise ValueError(f"rows: indices {bad[:5].tolist()} outside [0, {T.shape[0]})")
    return np.array(T[r], dtype=np.float64)


def reduce(model, masters, n_modes: int, method: str = "gmr+", n_report: int = 30,
           progress: bool = True) -> Reduction:
    """Reduce a finite element model (paper 004 eq. 4-6).

    Parameters
    ----------
    model : FEModel
        Constrained model; only ``model.M`` and ``model.K`` (sparse, (N, N)) are used.
    masters : array of int, shape (Nm,)
        Master DOF indices into the model's DOFs, in the order wanted for ``u_m``.
    n_modes : int
        Dominant slave modes ``N_d`` (eq. 5). Ignored (0) for ``"guyan"``.
    method : {"gmr+", "cb+r", "cb", "guyan"}
        GMR+ (CB plus residual-flexibility correction, eq. 4), CB with the residual-flexibility
        vectors as coordinates of their own (``T = [T_0, [0; R]]``, statically exact:
        :func:`offline.reduction.gmr.residual_vectors`), Craig-Bampton (``T = T_0``) or
        Guyan (``T = [I; Y]``).
    n_report : int
        Eigenvalues compared with the full model (first ``min(n_report, n)``); 0 skips the
        full-model eigensolution.
    progress : bool
        Show progress bars on stderr.

    Returns
    -------
    Reduction

    Raises
    ------
    ValueError
        Bad ``method``, ``masters``, ``n_modes`` or ``n_report``; a slave set with rigid-body
        motion and too few modes (or Guyan, which cannot represent it).
    """
    # load scipy's own BLAS before limiting threads (the limit applies to loaded libraries)
    need("scipy.linalg")
    need("scipy.sparse.linalg")
    with _blas_threads(BLAS_THREADS):
        return _reduce(model, masters, n_modes, method, n_report, progress)


def _blas_threads(n: int | None):
    """Context limiting BLAS threads (threadpoolctl, installed with scikit-learn)."""
    if n is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with the offline extra
        return contextlib.nullcontext()
    return threadpool_limits(limits=n, user_api="blas")


def _checked(model, n_modes, method, n_report):
    """The model's ``(K, M)`` checked (:func:`_check_matrix`) and ``n_modes`` (0 for Guyan);
    ValueError naming the argument."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    for name, v in (("n_modes", n_modes), ("n_report", n_report)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name}: expected a non-negative integer, got {v!r}")
    K, M = getattr(model, "K", None), getattr(model, "M", None)
    if K is None or M is None:
        raise ValueError("model: expected an FEModel with sparse M and K")
    K, M = _check_matrix(K, "model.K"), _check_matrix(M, "model.M")
    if K.shape != M.shape:
        raise ValueError(f"model.K {K.shape} and model.M {M.shape} differ in shape")
    n_modes = 0 if method == "guyan" else int(n_modes)
    if method != "guyan" and n_modes < 1:
        raise ValueError(f"n_modes: {method} needs at least one slave mode, got {n_modes}")
    return K, M, n_modes


def _slave_modes(part, n_modes: int, method: str, timings: dict, diag: dict):
    """The slave eigenproblem (eq. 5) and its factorisation: ``(modes, Flexibility)``;
    ValueError when the masters do not restrain the structure and the method cannot say so."""
    sm = modes(part.K_ss, part.M_ss, n_modes)
    timings["slave_factorise"] = sm.timings["factorise"]
    timings["slave_eigen"] = sm.timings["eigen"]
    diag["sigma_slave"] = sm.factor.sigma
    diag["solver"] = sm.factor.solver
    diag.update({f"slave_{k}": v for k, v in sm.factor.info.items()})
    diag["n_rigid_slave"] = sm.n_rigid
    if sm.n_rigid and method == "guyan":
        raise ValueError(
            f"masters: they do not restrain the structure (the slave set has {sm.n_rigid} "
            f"rigid-body mode(s)); Guyan reduction is undefined - add masters or use "
            f"method='cb'/'gmr+' with n_modes >= {sm.n_rigid}")
    if sm.n_rigid > n_modes:
        raise ValueError(
            f"n_modes: the slave set has {sm.n_rigid} rigid-body mode(s) (masters do not "
            f"restrain it); n_modes={n_modes} must be at least that")
    if np.isfinite(sm.lam_next):
        diag["gamma_next"] = sm.lam_next
    return sm, Flexibility(sm.factor, part.M_ss, sm.Phi, sm.lam, n_rigid=sm.n_rigid)


def _project(K, M, masters, n_modes, method, progress, phase, bar, timings, diag):
    """Partition, slave modes, constraint modes, basis ``T`` and the reduced ``M``, ``K``
    (GMR+: with the residual flexibility). ``(T, Mh, Kh, n_full, masters)``; the slave
    factorisation is released on return, before the full model is factorised (peak memory)."""
    # ---------------------------------------------------------------- partition (eq. 3)
    t0 = phase("partition")
    part = partition(K, M, masters)
    n_s = part.s.size
    if n_modes > n_s:
        raise ValueError(f"n_modes: {n_modes} exceeds the {n_s} slave DOFs")
    timings["partition"] = time.perf_counter() - t0
    bar.update()
    phase("slave eigen")  # ------------------------------- slave eigenproblem (eq. 5) + LU
    sm, flex = _slave_modes(part, n_modes, method, timings, diag)
    bar.update()
    # ------------------------------------------------------ constraint modes (eq. 4c)
    t0 = phase("constraint modes")
    Y = constraint_modes(part, flex, progress=progress)
    timings["constraint_modes"] = time.perf_counter() - t0
    bar.update()
    # ---------------------------------------------------- basis and projection (eq. 6)
    t0 = phase("projection")
    psi = None if method == "guyan" else sm.Phi
    T = guyan_basis(part, Y) if method == "guyan" else craig_bampton_basis(part, Y, psi)
    Mh, asym_M = project(T, M)
    Kh, asym_K, coupling = reduced_stiffness(part, Y, psi)
    timings["projection"] = time.perf_counter() - t0
    bar.update()
    if method == "gmr+":
        # ------------------------------------------- residual flexibility (eq. 4b, 4c)
        t0 = phase("residual flexibility")
        Tr_s = gmr_correction(part, Y, flex, Mh, Kh)
        T[part.s] += Tr_s
        timings["residual_flexibility"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        Mh, asym_M = project(T, M)
        Kh, asym_K, coupling = reduced_stiffness(part, Y, psi, Tr_s)
        timings["projection"] += time.perf_counter() - t0
        bar.update()
    if method == "cb+r":  # the residual vectors as coordinates of their own
        T, Mh, Kh, asym_M = _with_residual(part, Y, flex, T, Kh, M, phase, timings)
        bar.update()
    diag["K_coupling"] = coupling
    diag["asym_M"] = asym_M
    diag["asym_K"] = asym_K
    if flex.iterations:
        diag["flex_iterations"] = int(max(flex.iterations))
    return T, Mh, Kh, part.n, part.m


def _with_residual(part, Y, flex, T, Kh, M, phase, timings):
    """``"cb+r"``: the Craig-Bampton basis ``T`` with the residual-flexibility vectors
    appended (:func:`offline.reduction.gmr.residual_vectors`); ``(T, M_hat, K_hat, asym_M)``
    with ``K_hat = diag(K_0, R^T K_ss R)``."""
    t0 = phase("residual flexibility")
    R_s, K_rr = residual_vectors(part, Y, flex)
    Tx = np.zeros((T.shape[0], T.shape[1] + R_s.shape[1]))
    Tx[:, :T.shape[1]] = T
    Tx[part.s, T.shape[1]:] = R_s
    Mh, asym_M = project(Tx, M)
    Kx = np.zeros((Tx.shape[1], Tx.shape[1]))
    Kx[:T.shape[1], :T.shape[1]] = Kh
    Kx[T.shape[1]:, T.shape[1]:] = K_rr
    timings["residual_flexibility"] = time.perf_counter() - t0
    return Tx, Mh, Kx, asym_M


def _full_reference(K, M, nr: int, phase, bar, timings, diag):
    """The full model's ``nr`` lowest eigenvalues (the reduction's reference) and its number
    of rigid-body modes among them."""
    if not nr:
        return np.zeros(0), 0
    phase("full eigen")
    fm = modes(_csr(K), _csr(M), nr)
    timings["full_factorise"] = fm.timings["factorise"]
    timings["full_eigen"] = fm.timings["eigen"]
    diag["sigma_full"] = fm.factor.sigma
    diag["n_rigid_full"] = fm.n_rigid
    bar.update()
    return fm.lam, min(fm.n_rigid, nr)


def _reduce(model, masters, n_modes, method, n_report, progress) -> Reduction:
    sla = need("scipy.linalg")
    t_all = time.perf_counter()
    K, M, n_modes = _checked(model, n_modes, method, n_report)
    timings: dict[str, float] = {}
    diag: dict = {}
    phases = ["partition", "slave eigen", "constraint modes", "projection"]
    if method in ("gmr+", "cb+r"):
        phases.append("residual flexibility")
    phases += ["reduced eigen"] + (["full eigen"] if n_report else [])
    bar = _progress(total=len(phases), desc=f"reduce {method}", enable=progress)

    def phase(name):
        bar.set_postfix_str(name)
        return time.perf_counter()

    try:
        T, Mh, Kh, n_full, m_idx = _project(K, M, masters, n_modes, method, progress, phase,
                                            bar, timings, diag)
        # -------------------------------------------------------------- reduced eigen
        t0 = phase("reduced eigen")
        try:
            sla.cholesky(Mh, lower=True)
        except sla.LinAlgError:
            raise ValueError(f"reduced mass matrix of {method} is not positive definite "
                             f"(masters or modes linearly dependent?)") from None
        nr = min(int(n_report), Mh.shape[0])
        lam_red = sla.eigh(Kh, Mh, eigvals_only=True)
        timings["reduced_eigen"] = time.perf_counter() - t0
        bar.update()
        lam_full, n_rigid_full = _full_reference(K, M, nr, phase, bar, timings, diag)
    finally:
        bar.close()

    lam_red_r = lam_red[:nr]
    timings["total"] = time.perf_counter() - t_all
    report = ReductionReport(
        method=method, n_full=n_full, n_reduced=Mh.shape[0],
        freqs_full=frequencies(lam_full), freqs_reduced=frequencies(lam_red_r),
        eig_error=eigenvalue_error(lam_full, lam_red_r, n_rigid_full) if nr else np.zeros(0),
        timings=timings, diagnostics=diag, lam_full=lam_full, lam_reduced=lam_red_r,
        n_rigid=n_rigid_full,
    )
    return Reduction(method=method, M=Mh, K=Kh, T=T, masters=m_idx, n_modes=n_modes,
                     report=report)


def _check_matrix(A, name: str):
    """CSR copy check: square, finite, symmetric to 1e-10 relative (ValueError naming it)."""
    sp = need("scipy.sparse")
    if not sp.issparse(A):
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D matrix, got shape {A.shape}")
    A = sp.csr_matrix(A, dtype=np.float64)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name}: expected a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A.data)):
        raise ValueError(f"{name}: contains NaN or inf")
    scale = float(np.max(np.abs(A.data), initial=0.0))
    if scale == 0.0:
        raise ValueError(f"{name}: is all zero")
    # || A - A^T ||_max <= 1e-10 max |A|
    asym = float(np.max(np.abs((A - A.T).data), initial=0.0))
    if asym > 1e-10 * scale:
        raise ValueError(f"{name}: not symmetric (max |A - A^T| = {asym:.3g}, "
                         f"max |A| = {scale:.3g})")
    return A


def _csr(A):
    """``A`` as a CSR matrix."""
    return need("scipy.sparse").csr_matrix(A)
