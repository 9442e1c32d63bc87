"""The lowest eigenpairs of a sparse symmetric pencil ``K phi = lambda M phi`` (shift-invert).

Used for the slave eigenproblem (paper 004 eq. 5, ``K_ss psi = gamma M_ss psi``) and for the
full-model reference eigenvalues of the reduction report.

Rigid-body motion
-----------------
A free-free structure (or a slave set that the masters do not restrain) has a singular ``K``:
shift-invert about ``sigma = 0`` then fails (exactly singular factor) or returns noise. The
shift is therefore chosen automatically (:func:`modes`):

1. Factorise ``K`` (``sigma = 0``) and compute the ``k`` lowest pairs. If this succeeds and the
   spectrum shows no rigid-body modes (:func:`rigid_count`), ``sigma = 0`` is kept: this is the
   paper's unshifted formulation.
2. Otherwise the shift is negative, ``sigma = -lambda_e`` with ``lambda_e`` the lowest elastic
   eigenvalue (so ``K - sigma M`` is positive definite and about as well conditioned as a
   clamped structure). If step 1 gave no elastic eigenvalue (the factorisation broke down), a
   provisional shift ``-1e-8 * median(K_ii / M_ii)`` finds one first.

The factorisation of ``K - sigma M`` is returned so the caller reuses it (constraint modes and
residual flexibility in :mod:`.guyan`, :mod:`.gmr`). Eigenpairs do not depend on ``sigma``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from offline._deps import MissingDependency, need
from offline.reduction import pardiso
from offline.reduction.pardiso import SingularFactor  # noqa: F401 (API)

#: True when MKL PARDISO can be loaded (the name this module has always exported).
pardiso_available = pardiso.available

#: Pencils up to this size are solved densely (scipy.linalg.eigh): exact, and eigsh cannot
#: return all but one eigenpair.
DENSE_MAX = 400

#: Ratio between the first elastic eigenvalue and the largest |eigenvalue| below it for the
#: modes below to count as rigid-body modes (see :func:`rigid_count`).
RIGID_GAP = 1e6

#: Extra eigenpairs computed beyond the requested ones (rigid-mode gap, first residual mode).
PROBE = 4


def max_modes(n: int) -> int:
    """Most eigenpairs :func:`modes` returns for an ``n``-DOF pencil.

    Every one of them when the pencil is solved densely (``n <= DENSE_MAX``), all but one
    with the sparse Lanczos solver. Modal superpositions that want "the full model" use it
    so that a small model (an imported 10-DOF chain) is not silently truncated.
    """
    return int(n) if n <= DENSE_MAX else int(n) - 1


#: Accepted ``solver`` names of :func:`factorize` / :func:`modes`.
SOLVERS = ("auto", "superlu", "pardiso")

#: Environment variable choosing the solver when the ``solver`` argument is None.
SOLVER_ENV = "VSENSE_SPARSE_SOLVER"

@dataclass
class Factor:
    """Factorisation of ``A = K - sigma M`` for many solves (SuperLU or PARDISO).

    Attributes
    ----------
    sigma : float
        Shift [rad^2/s^2].
    n : int
        Size of ``A``.
    solver : str
        ``"superlu"`` or ``"pardiso"``.
    inertia : tuple of int or None
        ``(n_positive, n_negative)`` eigenvalues of ``A`` (Sylvester: signs of the pivots of
        the symmetric factorisation); ``n_negative`` is the number of eigenvalues of the
        pencil below ``sigma``. None when SuperLU had to pivot off the diagonal.
    info : dict
        Backend statistics (PARDISO: ``nnz_factor``, ``memory_mib``).
    """

    sigma: float
    n: int
    _lu: object = field(repr=False)
    solver: str = "superlu"
    inertia: tuple | None = None
    info: dict = field(default_factory=dict)

    def solve(self, B: np.ndarray) -> np.ndarray:
        """``A^-1 B`` for a dense ``B`` of shape (n,) or (n, r); same shape returned."""
        B = np.asarray(B, dtype=np.float64)
        return self._lu.solve(np.ascontiguousarray(B) if B.ndim == 1 else np.asfortranarray(B))


def sparse_solver(solver: str | None = None) -> str:
    """Resolve a solver choice to ``"superlu"`` or ``"pardiso"``.

    Parameters
    ----------
    solver : {"auto", "superlu", "pardiso"} or None
        None reads ``VSENSE_SPARSE_SOLVER`` (default ``"auto"``). ``"auto"`` is PARDISO when
        ``pypardiso`` and MKL load, SuperLU otherwise.

    Raises
    ------
    ValueError
        Unknown name (naming the argument or the environment variable).
    MissingDependency
        ``"pardiso"`` requested but not loadable.
    """
    where = "solver"
    if solver is None:
        solver, where = os.environ.get(SOLVER_ENV, "") or "auto", SOLVER_ENV
    name = str(solver).strip().lower()
    if name not in SOLVERS:
        raise ValueError(f"{where}: expected one of {', '.join(SOLVERS)}, got {solver!r}")
    if name == "superlu":
        return name
    ok = pardiso.available()
    if name == "auto":
        return "pardiso" if ok else "superlu"
    if not ok:
        raise MissingDependency(
            f"{where}={solver!r}: MKL PARDISO is not available ({pardiso.load_error()}); "
            f"pip install 'vsense[fast]' (x86-64 only) or use solver='superlu'")
    return name


def factorize(K, M=None, sigma: float = 0.0, solver: str | None = None) -> Factor:
    """Factorise ``A = K - sigma M`` once for many solves.

    * SuperLU: minimum-degree ordering of ``A^T + A`` and no off-diagonal pivoting (``A`` is
      symmetric; positive definite whenever ``sigma`` is below the lowest eigenvalue), which
      keeps the symmetric fill-reducing ordering.
    * PARDISO: symmetric indefinite ``L D L^T`` (matrix type -2) of the upper triangle, so a
      shift above some eigenvalues is fine; ``pardiso.PARDISO_ORDERING`` (AMD), ``PARDISO_THREADS``
      (1) MKL threads, ``PARDISO_REFINE`` (0) refinement steps.

    Parameters
    ----------
    K, M : scipy.sparse matrix, shape (n, n)
        Symmetric stiffness and mass.
    sigma : float
        Shift [rad^2/s^2].
    solver : {"auto", "superlu", "pardiso"} or None
        Backend (:func:`sparse_solver`; None: ``VSENSE_SPARSE_SOLVER`` or ``"auto"``).

    Raises
    ------
    SingularFactor
        SuperLU: a pivot is exactly zero or not finite. PARDISO: a zero pivot or a pivot
        below ``10**-PIVOT_EXP ||A||`` (perturbed). Both: ``A`` has NaN or inf entries.
    """
    sp = need("scipy.sparse")
    backend = sparse_solver(solver)
    # A = K - sigma M
    A = K if sigma == 0.0 or M is None else K - sigma * M
    if not np.all(np.isfinite(A.data if sp.issparse(A) else np.asarray(A))):
        raise SingularFactor(f"K - ({sigma:g}) M has NaN or inf entries")
    if backend == "pardiso":
        pf = pardiso.Pardiso(sp.csr_matrix(A, dtype=np.float64), pardiso.PARDISO_THREADS, sigma)
        return Factor(sigma=float(sigma), n=pf.n, _lu=pf, solver="pardiso",
                      inertia=pf.inertia, info=pf.info)
    spla = need("scipy.sparse.linalg")
    A = sp.csc_matrix(A, dtype=np.float64)
    try:
        lu = spla.splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                       options={"SymmetricMode": True})
    except RuntimeError as exc:  # "Factor is exactly singular"
        raise SingularFactor(f"K - ({sigma:g}) M is singular: {exc}") from exc
    d = lu.U.diagonal()
    if not np.all(np.isfinite(d)) or np.any(d == 0.0):
        raise SingularFactor(f"K - ({sigma:g}) M has a zero or non-finite pivot")
    # symmetric pivoting only (perm_r == perm_c): A = P^T L U P, U = D L^T, inertia = signs of d
    inertia = ((int(np.sum(d > 0)), int(np.sum(d < 0)))
               if np.array_equal(lu.perm_r, lu.perm_c) else None)
    return Factor(sigma=float(sigma), n=A.shape[0], _lu=lu, solver="superlu", inertia=inertia)


def rigid_count(lam: np.ndarray, gap: float = RIGID_GAP) -> int:
    """Number of rigid-body (zero) eigenvalues at the bottom of a computed spectrum.

    Modes ``0..i`` count as rigid when the next eigenvalue exceeds ``gap`` times the largest
    ``|lambda|`` among them (round-off puts computed zero eigenvalues at about
    ``eps * lambda_max``, elastic spectra have no jump of 10^6 between neighbours), and any
    eigenvalue ``<= 0`` is rigid. If *all* computed values are at round-off level no gap is
    visible; they are then counted rigid only when ``<= 0``.

    Parameters
    ----------
    lam : ndarray, shape (k,)
        Eigenvalues [rad^2/s^2].
    """
    a = np.sort(np.asarray(lam, dtype=float))
    n = int(np.sum(a <= 0.0))
    running = 0.0
    for i in range(a.size - 1):
        running = max(running, abs(a[i]))
        # modes 0..i rigid if lambda_{i+1} > gap * max_{j<=i} |lambda_j|
        if a[i + 1] > gap * running:
            n = max(n, i + 1)
    return n


def eigenpairs(K, M, k: int, factor: Factor | None = None, seed: int = 0):
    """The ``k`` lowest eigenpairs of ``K phi = lambda M phi``, mass-normalised.

    Shift-invert Lanczos (ARPACK ``eigsh``, ``OPinv = (K - sigma M)^-1`` from ``factor``);
    dense ``scipy.linalg.eigh`` when ``n <= DENSE_MAX``.

    Parameters
    ----------
    K, M : scipy.sparse matrix, shape (n, n)
        Symmetric stiffness and (positive definite) mass.
    k : int
        Number of pairs, ``1 <= k <= n`` (``k < n`` for the sparse path).
    factor : Factor, optional
        Factorisation of ``K - sigma M`` (required for the sparse path).
    seed : int
        Seed of the Lanczos start vector.

    Returns
    -------
    lam : ndarray, shape (k,)
        Eigenvalues [rad^2/s^2], ascending.
    Phi : ndarray, shape (n, k)
        Eigenvectors with ``Phi^T M Phi = I``.
    """
    n = K.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"number of modes k={k} must lie in [1, {n}]")
    if n <= DENSE_MAX:
        sla = need("scipy.linalg")
        Kd = _dense_sym(K)
        Md = _dense_sym(M)
        lam, Phi = sla.eigh(Kd, Md, subset_by_index=[0, k - 1])
    else:
        if k >= n:
            raise ValueError(f"sparse eigensolver needs k < n; got k={k}, n={n}")
        if factor is None:
            raise ValueError("a factorisation of K - sigma M is needed for shift-invert")
        spla = need("scipy.sparse.linalg")
        OPinv = spla.LinearOperator((n, n), matvec=factor.solve, dtype=np.float64)
        v0 = np.random.default_rng(seed).standard_normal(n)
        ncv = min(n, max(2 * k + 1, k + 20))
        lam, Phi = spla.eigsh(K, k=k, M=M, sigma=factor.sigma, which="LM", OPinv=OPinv,
                              v0=v0, ncv=ncv)
    order = np.argsort(lam)
    lam, Phi = lam[order], np.array(Phi[:, order])
    # phi_i <- phi_i / sqrt(phi_i^T M phi_i)   (mass normalisation)
    mnorm = np.einsum("ij,ij->j", Phi, M @ Phi)
    Phi /= np.sqrt(mnorm)
    return lam, Phi


@dataclass
class Modes:
    """Result of :func:`modes`.

    Attributes
    ----------
    lam : ndarray, shape (k,)
        Lowest eigenvalues [rad^2/s^2], ascending.
    Phi : ndarray, shape (n, k)
        Mass-normalised eigenvectors.
    n_rigid : int
        Rigid-body (zero) eigenvalues found among the ``k + PROBE`` computed ones (may exceed
        ``k``: then ``lam`` are all rigid).
    factor : Factor
        Factorisation of ``K - sigma M`` with ``factor.sigma`` the shift used (0 when ``K``
        is positive definite, negative otherwise).
    timings : dict
        ``{"factorise": s, "eigen": s}``.
    lam_next : float
        The eigenvalue after the last returned one (NaN if not computed): the first residual
        eigenvalue when ``lam`` are the dominant modes.
    """

    lam: np.ndarray
    Phi: np.ndarray
    n_rigid: int
    factor: Factor
    timings: dict
    lam_next: float = float("nan")


def _k_run(k: int, n: int) -> int:
    """The eigenpairs computed for ``k`` asked of an ``n``-DOF pencil (``PROBE`` more, to
    recognise rigid-body modes by the gap above them); ValueError when impossible."""
    if k < 0:
        raise ValueError(f"number of modes k={k} must be >= 0")
    k_run = min(k + PROBE, n - 1 if n > DENSE_MAX else n)
    if k > k_run:
        raise ValueError(f"number of modes k={k} too large for a {n}-DOF pencil "
                         f"(at most {k_run})")
    if k_run < 1:
        raise ValueError(f"cannot compute modes of a {n}-DOF pencil")
    return k_run


def _scale_shift(K, M) -> float:
    """A provisional shift from the matrix scale when no elastic eigenvalue is known:
    ``-1e-8 median(|K_ii| / M_ii)`` (-1 when that is 0)."""
    d_k = np.asarray(K.diagonal(), dtype=float)
    d_m = np.asarray(M.diagonal(), dtype=float)
    ok = d_m > 0
    if not np.any(ok):
        raise ValueError("mass matrix has no positive diagonal entry")
    sig_p = -1e-8 * float(np.median(np.abs(d_k[ok]) / d_m[ok]))
    return -1.0 if sig_p == 0.0 else sig_p


def modes(K, M, k: int, sigma: float | None = None, seed: int = 0,
          solver: str | None = None) -> Modes:
    """Lowest ``k`` eigenpairs and a reusable factorisation, with the automatic shift.

    Parameters
    ----------
    K, M : scipy.sparse matrix, shape (n, n)
        Symmetric stiffness (positive semi-definite) and mass (positive definite).
    k : int
        Number of eigenpairs (``k = 0``: only the shift and factorisation are determined).
        ``PROBE`` more are computed internally so that rigid-body modes are recognised by the
        gap above them even when ``k`` equals their number.
    sigma : float, optional
        Fixed shift (``<= 0``); ``None`` chooses it as described in the module docstring.
    seed : int
        Seed of the Lanczos start vector.
    solver : {"auto", "superlu", "pardiso"} or None
        Sparse direct solver (:func:`factorize`); None: ``VSENSE_SPARSE_SOLVER`` or auto.
    """
    n = K.shape[0]
    t = {"factorise": 0.0, "eigen": 0.0}
    solver = sparse_solver(solver)
    k_run = _k_run(k, n)

    def run(s):
        t0 = time.perf_counter()
        dense_only = n <= DENSE_MAX and s is None
        fac = None if dense_only else factorize(K, M, 0.0 if s is None else s, solver)
        t1 = time.perf_counter()
        lam, Phi = eigenpairs(K, M, k_run, fac, seed)
        t["factorise"] += t1 - t0
        t["eigen"] += time.perf_counter() - t1
        return fac, lam, Phi

    def done(fac, lam, Phi):
        nr = rigid_count(lam)
        nxt = float(lam[k]) if lam.size > k else float("nan")
        return Modes(lam[:k], np.ascontiguousarray(Phi[:, :k]), nr, fac, t, nxt)

    if sigma is not None:
        if sigma > 0:
            raise ValueError(f"sigma={sigma:g} must be <= 0 (below the lowest eigenvalue)")
        return done(*run(sigma))

    # 1. unshifted (dense: eigenpairs directly, factorisation below)
    lam_ref = None
    try:
        fac, lam, Phi = run(None if n <= DENSE_MAX else 0.0)
        nr = rigid_count(lam)
        if nr == 0:
            t0 = time.perf_counter()
            fac = factorize(K, M, 0.0, solver) if fac is None else fac
            t["factorise"] += time.perf_counter() - t0
            return done(fac, lam, Phi)
        lam_ref = float(lam[nr]) if nr < lam.size else None
        if n <= DENSE_MAX and lam_ref is not None:
            t0 = time.perf_counter()
            fac = factorize(K, M, -lam_ref, solver)
            t["factorise"] += time.perf_counter() - t0
            return done(fac, lam, Phi)
    except (SingularFactor, need("scipy.sparse.linalg").ArpackError):
        pass

    # 2. provisional shift from the matrix scale when no elastic eigenvalue is known
    if lam_ref is None:
        sig_p = _scale_shift(K, M)
        fac, lam, Phi = run(sig_p)
        nr = rigid_count(lam)
        lam_ref = float(lam[nr]) if nr < lam.size else None
        if n <= DENSE_MAX or lam_ref is None or 1e-3 <= -sig_p / lam_ref <= 1.0:
            return done(fac, lam, Phi)

    # 3. final shift at minus the first elastic eigenvalue
    return done(*run(-lam_ref))


def _dense_sym(A) -> np.ndarray:
    A = A.toarray() if hasattr(A, "toarray") else np.asarray(A, dtype=float)
    # A <- (A + A^T) / 2
    return 0.5 * (A + A.T)
