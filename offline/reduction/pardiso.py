"""MKL PARDISO through ctypes: ``L D L^T`` of a real symmetric (indefinite) sparse matrix.

The binding behind :func:`offline.reduction.eigen.factorize` with ``solver="pardiso"``. MKL is
located through ``pypardiso`` (the ``fast`` extra, x86-64 only); nothing here is imported by
the edge. The module-level settings below are read at each factorisation.
"""

from __future__ import annotations

import ctypes
import platform

import numpy as np

from offline._deps import MissingDependency, need

#: MKL threads inside PARDISO calls (None: MKL's own setting). One: on the shared 2-core
#: machine (load 4) two threads cut the 209k-DOF factorisation from 15.4 s to 13.1 s wall but
#: cost more CPU (16.0 s vs 14.2 s) and made the solves slower (48 right-hand sides 2.8 s vs
#: 1.9 s); one thread also matches ``reduce``'s one-BLAS-thread rule.
PARDISO_THREADS: int | None = 1

#: Fill-reducing ordering of PARDISO (``iparm(2)``): ``"amd"`` (minimum degree, the family of
#: SuperLU's MMD) or ``"metis"`` (nested dissection). Measured on the 209k-DOF housing slave
#: stiffness: METIS 9.5 s / 1.64 GiB peak / 1.05e8 factor entries, AMD 15.4 s / 1.97 GiB /
#: 1.47e8, same solve time (0.14-0.15 s per right-hand side). But with METIS the lowest
#: eigenvalues of the ill-conditioned test cantilever (mixed w/theta units, cond ~ 1e11-1e12)
#: came out 2e-7 to 1e-6 off the beam-theory roots, with AMD (and SuperLU) 3e-9 to 1.4e-8;
#: two refinement steps repair METIS but make every solve 3.5x dearer. Default: AMD.
PARDISO_ORDERING = "amd"

#: Iterative refinement steps per PARDISO solve (``iparm(8)``; 0: only after perturbed
#: pivots, which raise here anyway).
PARDISO_REFINE = 0

#: PARDISO perturbs pivots smaller than ``10**-PIVOT_EXP * ||A||`` (8 is MKL's default for
#: symmetric indefinite matrices); any perturbed pivot raises :class:`SingularFactor`.
#: Measured: 8 flags the exactly singular free spring chains (10 to 2000 DOFs) as SuperLU does
#: (with AMD any exponent 8..13 does; with METIS 10 and above miss the 2000-DOF chain) and not
#: the regular cantilever beam with cond ~ 5e11 or the paper's plate. Neither solver flags a
#: free solid or truss whose zero pivots are round-off: :func:`modes` recognises those from
#: the spectrum (rigid_count).
PIVOT_EXP = 8


class SingularFactor(RuntimeError):
    """The shifted stiffness ``K - sigma M`` could not be factorised (singular)."""


_MKL: object = None        # (pardiso, set_threads_local) once loaded; False if unavailable
_MKL_ERROR = ""


def _mkl():
    """The MKL ``pardiso`` and ``MKL_Set_Num_Threads_Local`` functions, or None (cached)."""
    global _MKL, _MKL_ERROR
    if _MKL is None:
        _MKL = False
        try:
            if platform.machine().lower() not in ("x86_64", "amd64"):
                raise ImportError(f"MKL is x86-64 only, this is {platform.machine()}")
            import pypardiso  # locates mkl_rt (pip wheel, conda, PYPARDISO_MKL_RT)

            lib = ctypes.CDLL(pypardiso.ps.libmkl._name)
            fn = lib.pardiso
            i32p, f64p = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_double)
            fn.argtypes = [ctypes.POINTER(ctypes.c_int64)] + [i32p] * 5 + [
                f64p, i32p, i32p, i32p, i32p, i32p, i32p, f64p, f64p, i32p]
            fn.restype = None
            nt = lib.MKL_Set_Num_Threads_Local
            nt.argtypes, nt.restype = [ctypes.c_int], ctypes.c_int
            _MKL = (fn, nt)
        except (ImportError, OSError, AttributeError) as exc:
            _MKL_ERROR = f"{type(exc).__name__}: {exc}"
    return _MKL or None


#: PARDISO error codes (MKL reference, ``pardiso`` "error" parameter).
_PARDISO_ERRORS = {
    -1: "input inconsistent", -2: "not enough memory", -3: "reordering problem",
    -4: "zero pivot", -5: "unclassified internal error", -6: "reordering failed",
    -7: "diagonal matrix is singular", -8: "32-bit integer overflow",
    -9: "not enough memory for out-of-core", -10: "out-of-core file error",
    -11: "out-of-core read/write error", -13: "interrupted",
}


class Pardiso:
    """MKL PARDISO ``L D L^T`` of a real symmetric matrix (type -2); frees itself on collection.

    Keeps the upper triangle (CSR, 0-based, explicit diagonal) alive for the solve phase.
    """

    MTYPE = -2

    def __init__(self, A, threads: int | None, sigma: float):
        sp = need("scipy.sparse")
        fn_nt = _mkl()
        if fn_nt is None:  # pragma: no cover - eigen.sparse_solver checked this
            raise MissingDependency(f"MKL PARDISO is not available ({_MKL_ERROR})")
        self._fn, self._nt = fn_nt
        self.threads = threads
        n = A.shape[0]
        if A.shape != (n, n):
            raise ValueError(f"K - sigma M: expected a square matrix, got shape {A.shape}")
        self.n = n
        # upper triangle with every diagonal entry stored (PARDISO needs the diagonal of
        # symmetric matrices even where it is zero): coo -> csr sums duplicates, keeps zeros
        U = sp.triu(A, format="coo")
        d = np.arange(n)
        U = sp.coo_matrix((np.concatenate([U.data, np.zeros(n)]),
                           (np.concatenate([U.row, d]), np.concatenate([U.col, d]))),
                          shape=(n, n)).tocsr()
        U.sum_duplicates()
        U.sort_indices()
        self._a = np.ascontiguousarray(U.data, dtype=np.float64)
        self._ia = np.ascontiguousarray(U.indptr, dtype=np.int32)
        self._ja = np.ascontiguousarray(U.indices, dtype=np.int32)
        if U.nnz >= 2 ** 31 - 1:
            raise ValueError(f"K - sigma M: {U.nnz} non-zeros exceed PARDISO's 32-bit indices")
        del U
        self._pt = np.zeros(64, dtype=np.int64)
        self._iparm = np.zeros(64, dtype=np.int32)
        ip = self._iparm
        ip[0] = 1            # iparm(1): no solver defaults, use the values below
        orderings = {"amd": 0, "metis": 2}
        if PARDISO_ORDERING not in orderings:
            raise ValueError(f"PARDISO_ORDERING: expected 'amd' or 'metis', "
                             f"got {PARDISO_ORDERING!r}")
        ip[1] = orderings[PARDISO_ORDERING]   # iparm(2): fill-reducing ordering
        ip[7] = PARDISO_REFINE  # iparm(8): iterative refinement steps per solve
        ip[9] = PIVOT_EXP    # iparm(10): perturb pivots < 10^-PIVOT_EXP ||A|| (-> Singular)
        ip[10] = 0           # iparm(11): no scaling (symmetric indefinite default)
        ip[12] = 0           # iparm(13): no weighted matching
        ip[17] = -1          # iparm(18): report nnz of the factor
        ip[20] = 1           # iparm(21): Bunch-Kaufman 1x1 and 2x2 pivots
        ip[26] = 1           # iparm(27): check the CSR structure
        ip[34] = 1           # iparm(35): zero-based indices
        self._alive = False
        self._call(12, np.zeros((n, 1), order="F"), np.zeros((n, 1), order="F"))
        self._alive = True
        if ip[13] > 0:       # iparm(14): perturbed pivots
            self.free()
            raise SingularFactor(
                f"K - ({sigma:g}) M is singular: PARDISO perturbed {int(ip[13])} pivot(s) "
                f"below 1e-{PIVOT_EXP} ||A||")
        self.inertia = (int(ip[21]), int(ip[22]))      # iparm(22), iparm(23)
        # peak memory = max(iparm(15), iparm(16) + iparm(17)) [KiB]
        self.info = {"nnz_factor": int(ip[17]),
                     "memory_mib": max(int(ip[14]), int(ip[15]) + int(ip[16])) / 1024.0}

    def _call(self, phase: int, B: np.ndarray, X: np.ndarray) -> None:
        i32 = ctypes.c_int32
        err = i32(0)
        prev = self._nt(int(self.threads)) if self.threads else None
        try:
            self._fn(self._pt.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                     ctypes.byref(i32(1)), ctypes.byref(i32(1)), ctypes.byref(i32(self.MTYPE)),
                     ctypes.byref(i32(phase)), ctypes.byref(i32(self.n)),
                     self._a.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                     self._ia.ctypes.data_as(ctypes.POINTER(i32)),
                     self._ja.ctypes.data_as(ctypes.POINTER(i32)),
                     None, ctypes.byref(i32(B.shape[1] if B.ndim == 2 else 1)),
                     self._iparm.ctypes.data_as(ctypes.POINTER(i32)), ctypes.byref(i32(0)),
                     B.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                     X.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), ctypes.byref(err))
        finally:
            if prev is not None:
                self._nt(prev)
        if err.value != 0:
            code = err.value
            if phase != -1:
                self.free()
            msg = f"PARDISO phase {phase} failed: error {code} ({_PARDISO_ERRORS.get(code, '?')})"
            if code in (-4, -7):
                raise SingularFactor(msg)
            raise RuntimeError(msg)

    def solve(self, B: np.ndarray) -> np.ndarray:
        """``A^-1 B``, ``B`` of shape (n,) or (n, r)."""
        if not self._alive:
            raise RuntimeError("PARDISO factor was released")
        B = np.asarray(B, dtype=np.float64)
        if B.ndim not in (1, 2) or B.shape[0] != self.n:
            raise ValueError(f"B: expected shape ({self.n},) or ({self.n}, r), got {B.shape}")
        Bf = np.asfortranarray(B.reshape(self.n, -1))
        X = np.empty_like(Bf, order="F")
        if Bf.shape[1]:
            self._call(33, Bf, X)
        return X[:, 0] if B.ndim == 1 else X

    def free(self) -> None:
        """Release PARDISO's memory (idempotent)."""
        if self._pt.any():
            z = np.zeros((self.n, 1), order="F")
            self._call(-1, z, z)
            self._pt[:] = 0
        self._alive = False

    def __del__(self):
        try:
            self.free()
        except Exception:  # noqa: BLE001 - interpreter shutdown; nothing to report to
            pass


def available() -> bool:
    """True when MKL PARDISO (``pypardiso`` and its ``mkl``) can be loaded."""
    return _mkl() is not None


def load_error() -> str:
    """Why MKL PARDISO could not be loaded ('' when it loads or was not tried yet)."""
    _mkl()
    return _MKL_ERROR
