"""The Kalman smoother's step operator in the kernel's layout: the bundle's ``kf_*`` arrays
permuted and split into modal blocks, the force-model block, their low-rank coupling and the
measurement-chain rows (:func:`derive_smoother`), one per load level (:func:`level_operators`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from edge.bundle import Bundle
from edge.estimator.load_level import grid_nis_drop
from edge.estimator.operator import EstimatorError
from edge.estimator.smoother_checks import _rho, check_levels, check_scales


@dataclass
class SmootherOperator:
    """Kernel layout of the bundle's ``kf_*`` arrays, the state permuted from the bundle's
    ``[q_1, qd_1, ..., q_n, qd_n, xi, a]`` to ``[q_1..q_n, qd_1..qd_n, xi, a]`` (``perm``;
    ``a``: the measurement chain's states, :mod:`offline.smoother.chain`; none for point
    samples)."""

    perm: np.ndarray      # (ns,) kernel state s is the bundle's state perm[s]
    Am: np.ndarray        # (4, n) 2x2 modal blocks [a11, a12, a21, a22]; (4, 0) if dense
    Ad: np.ndarray        # (2n, 2n) dense modal part (non-proportional damping) or (0, 0)
    AcT: np.ndarray       # (nc, 2n) coupling of the modes to the force-model states, transposed
    Cl: np.ndarray        # (r, nc)  AcT = Cl^T Cr: the coupling's numerical rank r (SVD)
    Cr: np.ndarray        # (r, 2n)
    Af: np.ndarray        # (nc, nc) force-model block
    f_span: np.ndarray    # (nc, 2) non-zero [start, stop) of each row of Af (a cascade of
                          # sections is block lower triangular: half of it is zero)
    Ak: np.ndarray        # (nk, ns) rows of the nk chain states (last), over the whole state
    AKT: np.ndarray       # (nch, ns) (A K)^T
    H: np.ndarray         # (nch, ns) permuted
    h_span: np.ndarray    # (nch, 2) non-zero [start, stop) of each row of H
    K: np.ndarray         # (ns, nch) permuted
    Cq: np.ndarray        # (nq, ns) permuted
    q_span: np.ndarray    # (nq, 2)
    G: np.ndarray
    Sinv: np.ndarray
    std: np.ndarray
    lag: int
    nis_window: int
    nis_threshold: float
    nis_threshold_low: float
    n_forces: int
    n_outputs: int
    spectral_radius: float
    Wt: np.ndarray = None
    band_ba: np.ndarray = None
    band_gain: np.ndarray = None
    band_threshold: np.ndarray = None
    band_hz: np.ndarray = None
    ClT: np.ndarray = None      # (nc, r) Cl transposed, AfT (nc, nc) Af transposed and
    AfT: np.ndarray = None      # fT_span (nc, 2) its rows' non-zero [start, stop): the
    fT_span: np.ndarray = None  # kernel's layout (it sums them by columns)

    @property
    def n_state(self) -> int:
        return int(self.H.shape[1])

    @property
    def n_channels(self) -> int:
        return int(self.H.shape[0])


def _spans(M: np.ndarray) -> np.ndarray:
    """(rows, 2) int64: the [start, stop) of each row's non-zero entries ([0, 0] if none)."""
    out = np.zeros((M.shape[0], 2), np.int64)
    for r in range(M.shape[0]):
        nz = np.flatnonzero(M[r])
        if nz.size:
            out[r] = nz[0], nz[-1] + 1
    return out


def _low_rank(AcT: np.ndarray, rel: float = 1e-14):
    """``AcT = Cl^T Cr`` with ``r`` = the number of singular values above ``rel`` times the
    largest (the coupling of the modes to the force-model states over one step has a
    numerical rank of about 10 whatever the force model's order: 32 states at order 16), when
    that is cheaper per step than ``AcT`` itself; else ``Cl = I``, ``Cr = AcT`` (``Cl = AcT^T``,
    ``Cr = I`` when ``nc > m2``: r <= m2 always, the kernel keeps ``Cl xi`` in m2 slots of its
    scratch); none (r = 0) when ``AcT`` is 0. The dropped part is below ``rel`` of the largest
    singular value (round-off of its computation)."""
    nc, m2 = AcT.shape
    if nc == 0 or m2 == 0 or not np.any(AcT):
        return np.zeros((0, nc)), np.zeros((0, m2))
    U, sv, Vt = np.linalg.svd(AcT, full_matrices=False)
    r = int(np.sum(sv > rel * sv[0]))
    if r * (nc + m2) >= nc * m2:  # unfactored
        return (np.eye(nc), np.ascontiguousarray(AcT)) if nc <= m2 else (AcT.T.copy(), np.eye(m2))
    return np.ascontiguousarray((U[:, :r] * sv[:r]).T), np.ascontiguousarray(Vt[:r])


def derive_smoother(bundle: Bundle, check_stability: bool = True) -> SmootherOperator:
    """Structured, permuted layout of a smoother bundle's step matrix, and a stability check.

    ``kf_A`` is split into 2x2 modal blocks, one block of the force-model states and the
    coupling of the modes to the force states; if its modal part does not fit that pattern
    (non-proportional damping) it is one dense block. The layout reproduces ``kf_A`` exactly
    (checked); anything else (coupling into the force states from the modes) is refused.
    The last ``W nch`` states of a bundle built for a measurement chain (``bundle.chain``) are
    the chain's (the parts of the conversions in progress): their rows (``Ak``) depend on the
    whole state, no other row on them.
    """
    kf = bundle.kf
    A = np.asarray(kf["A"], dtype=float)
    ns = A.shape[0]
    n = bundle.n
    m2 = 2 * n
    nk = bundle.chain.n_states(len(bundle.channels), bundle.dt)
    nz = ns - nk              # states without the chain
    perm = np.concatenate([np.arange(0, m2, 2), np.arange(1, m2, 2),
                           np.arange(m2, ns)]).astype(np.int64)
    Ap = A[np.ix_(perm, perm)]
    blocks = np.zeros((ns, ns), bool)
    idx = np.arange(n)
    for r, c in ((0, 0), (0, n), (n, 0), (n, n)):
        blocks[idx + r, idx + c] = True
    blocks[:, m2:nz] = True
    if np.any(Ap[:m2, :m2][~blocks[:m2, :m2]] != 0.0):
        Am, Ad = np.zeros((4, 0)), Ap[:m2, :m2].copy()  # non-proportional: dense modal part
    else:
        Am = np.array([np.diag(Ap[:n, :n]), np.diag(Ap[:n, n:m2]), np.diag(Ap[n:m2, :n]),
                       np.diag(Ap[n:m2, n:m2])])
        Ad = np.zeros((0, 0))
    AcT = Ap[:m2, m2:nz].T.copy()
    Af = Ap[m2:nz, m2:nz].copy()
    Ak = Ap[nz:].copy()
    rebuilt = np.zeros((ns, ns))
    if Ad.size:
        rebuilt[:m2, :m2] = Ad
    else:
        for k, (r, c) in enumerate(((0, 0), (0, n), (n, 0), (n, n))):
            rebuilt[idx + r, idx + c] = Am[k]
    rebuilt[:m2, m2:nz] = AcT.T
    rebuilt[m2:nz, m2:nz] = Af
    rebuilt[nz:] = Ak
    if not np.array_equal(rebuilt, Ap):
        raise EstimatorError(f"{bundle.path or 'bundle'}: kf_A does not have the smoother's "
                             "structure (coupling into the force-model states from the modes, "
                             "or into the model from the measurement chain's states)")
    Cl, Cr = _low_rank(AcT)
    H = np.asarray(kf["H"], dtype=float)
    K = np.asarray(kf["K"], dtype=float)
    rho = float("nan")
    if check_stability:
        # prediction error dynamics x~+ = A (I - K H) x~ must be stable
        rho = _rho(A, K, H)  # inf when absurd (finite) kf_K or kf_H overflow the product
        if not rho < 1.0:
            raise EstimatorError(f"smoother gains of {bundle.path or 'the bundle'} are not "
                                 f"stable (spectral radius of A (I - K H) = {rho:.6f})")
    check_scales(kf, bundle.path or "bundle")
    Hp = np.ascontiguousarray(H[:, perm])
    Cq = np.ascontiguousarray(np.asarray(kf["Cq"], dtype=float)[:, perm])
    return SmootherOperator(
        perm=perm, Am=np.ascontiguousarray(Am), Ad=np.ascontiguousarray(Ad),
        AcT=np.ascontiguousarray(AcT), Cl=Cl, Cr=Cr, Af=np.ascontiguousarray(Af),
        f_span=_spans(Af), Ak=np.ascontiguousarray(Ak),
        AKT=np.ascontiguousarray((A @ K)[perm].T), H=Hp, h_span=_spans(Hp),
        K=np.ascontiguousarray(K[perm]), Cq=Cq, q_span=_spans(Cq),
        G=np.ascontiguousarray(kf["G"], dtype=float),
        Sinv=np.ascontiguousarray(kf["Sinv"], dtype=float),
        std=np.array(kf["std"], dtype=float), lag=int(kf["G"].shape[0]) - 1,
        nis_window=int(kf["nis_window"]), nis_threshold=float(kf["nis_threshold"]),
        nis_threshold_low=float(kf.get("nis_threshold_low", 0.0)),
        n_forces=len(bundle.forces), n_outputs=len(bundle.outputs), spectral_radius=rho,
        Wt=np.ascontiguousarray(kf["Wt"], dtype=float),
        band_ba=np.ascontiguousarray(kf["band_ba"], dtype=float).reshape(-1, 5),
        band_gain=np.array(kf["band_gain"], dtype=float),
        band_threshold=np.array(kf["band_threshold"], dtype=float),
        band_hz=np.array(kf["band_hz"], dtype=float).reshape(-1, 2),
        ClT=np.ascontiguousarray(Cl.T), AfT=np.ascontiguousarray(Af.T), fT_span=_spans(Af.T))


def level_operators(bundle: Bundle, op: SmootherOperator, check_stability: bool = True) -> list:
    """One operator per load level of the bundle (``kf_level_*``; :mod:`offline.smoother.
    levels`), sharing ``op``'s step matrix layout; ``[]`` without levels. Each level's gain
    stability-checked like ``kf_K``, its arrays against the design's
    (:func:`edge.estimator.smoother_checks.check_levels`)."""
    kf = bundle.kf
    if "level_grid" not in kf:
        return []
    check_levels(kf, bundle.path or "bundle", check_stability)
    A = np.asarray(kf["A"], dtype=float)
    # a load between two tracked levels reads a NIS below 1 under the nearer level's gains:
    # the lower threshold widened by the largest such drop (edge/estimator/load_level.py)
    low = op.nis_threshold_low * grid_nis_drop(kf["level_grid"], kf["level_nis"])
    out = []
    for i in range(np.asarray(kf["level_grid"]).size):
        K = np.asarray(kf["level_K"][i], dtype=float)
        out.append(replace(
            op, AKT=np.ascontiguousarray((A @ K)[op.perm].T), K=np.ascontiguousarray(K[op.perm]),
            G=np.ascontiguousarray(kf["level_G"][i], dtype=float),
            Sinv=np.ascontiguousarray(kf["level_Sinv"][i], dtype=float),
            Wt=np.ascontiguousarray(kf["level_Wt"][i], dtype=float),
            std=np.array(kf["level_std"][i], dtype=float), nis_threshold_low=low))
    return out
