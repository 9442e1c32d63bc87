"""Load-time sanity checks of a smoother bundle's gains beyond shapes and finiteness
(:func:`check_levels`, :func:`check_scales`; issue 40 item 9): what :mod:`edge.bundle_schema`
cannot say from one field alone. Each refusal is an ``EstimatorError`` naming the field (and
the load level) with the number that failed.

*Stable*: every load level's gain ``kf_level_K[l]`` must give a stable prediction error,
spectral radius of ``A (I - K_l H)`` below 1, as ``kf_K`` (:func:`edge.estimator.
smoother_operator.derive_smoother`).

*Absurd* (finite, but no design gives it), measured against the bundle's own scales with the
factor :data:`ABSURD`:

* a level's gains and matrices (``kf_level_K``, ``_G``, ``_Sinv``, ``_Wt``, ``_std``) against
  their design counterparts (``kf_K``, ...): largest magnitude above ``ABSURD`` times the
  design's. The levels span a factor of a few hundred of the load at most, and the gains
  change far less than that;
* the estimates' response to the innovations against the stated std: for each force and
  output ``q``, ``sqrt(sum_j (G_j S G_j^T)_qq)`` and ``sqrt((Cq K S K^T Cq^T)_qq)`` (``S =
  kf_Sinv^-1``, the innovation covariance: the estimate's swing per sample of innovation)
  above ``ABSURD`` times ``kf_std[q]``. An estimator whose estimate moves by 1e12 of its own
  error std per innovation is not one that any design produced (``kf_G`` x 1e300 gave
  estimates of 2.8e300 with flag 0).

Measured on ``examples/my_beam.toml`` as built (levels included): swings per innovation 0.01
to 2.7 times the stated std; level arrays up to 1e4 times the design's (``kf_level_Sinv`` at
the lowest level; ``_Wt`` 100, ``_std`` 32, ``_K`` and ``_G`` 1): the factor leaves 1e8 of
margin.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.operator import EstimatorError

#: Factor beyond the bundle's own scale at which a finite value is called absurd.
ABSURD = 1e12


def _rho(A: np.ndarray, K: np.ndarray, H: np.ndarray) -> float:
    """Spectral radius of ``A (I - K H)``; inf when absurd (finite) gains overflow it."""
    with np.errstate(over="ignore", invalid="ignore"):
        E = A - A @ K @ H
    return float(np.max(np.abs(np.linalg.eigvals(E)))) if np.isfinite(E).all() else np.inf


def check_levels(kf: dict, where: str, check_stability: bool = True) -> None:
    """The ``kf_level_*`` arrays (when present): stability of each level's gain and the
    magnitude of each level's arrays against the design's (module docstring)."""
    if "level_grid" not in kf:
        return
    A = np.asarray(kf["A"], dtype=float)
    H = np.asarray(kf["H"], dtype=float)
    for name, base in (("level_K", "K"), ("level_G", "G"), ("level_Sinv", "Sinv"),
                       ("level_Wt", "Wt"), ("level_std", "std")):
        ref = float(np.max(np.abs(kf[base]), initial=0.0))
        arr = np.asarray(kf[name], dtype=float)
        for lv in range(arr.shape[0]):
            big = float(np.max(np.abs(arr[lv]), initial=0.0))
            if big > ABSURD * ref and big > 0:
                raise EstimatorError(
                    f"{where}: kf_{name}[{lv}] (load level {lv}): largest magnitude {big:.3g} "
                    f"is more than {ABSURD:g} times the design's kf_{base} ({ref:.3g}): not a "
                    "gain any design gives")
    if not check_stability:
        return
    for lv, K in enumerate(np.asarray(kf["level_K"], dtype=float)):
        rho = _rho(A, K, H)
        if not rho < 1.0:
            raise EstimatorError(f"{where}: kf_level_K[{lv}] (load level {lv}): the gain is "
                                 f"not stable (spectral radius of A (I - K H) = {rho:.6g})")


def check_scales(kf: dict, where: str) -> None:
    """The estimates' swing per innovation against the stated std (module docstring)."""
    Sinv = np.asarray(kf["Sinv"], dtype=float)
    try:
        S = np.linalg.inv(Sinv)
    except np.linalg.LinAlgError:
        raise EstimatorError(f"{where}: kf_Sinv is singular (the inverse innovation "
                             "covariance must be invertible)") from None
    std = np.asarray(kf["std"], dtype=float)
    G = np.asarray(kf["G"], dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):  # inf or NaN fails the test below
        CK = np.asarray(kf["Cq"], dtype=float) @ np.asarray(kf["K"], dtype=float)
        g_swing = np.sqrt(np.abs(np.einsum("jqc,cd,jqd->q", G, S, G)))
        c_swing = np.sqrt(np.abs(np.einsum("qc,cd,qd->q", CK, S, CK)))
    for name, swing in (("kf_G", g_swing), ("kf_Cq", c_swing)):
        bad = ~(swing <= ABSURD * std) & (std > 0)
        if np.any(bad):
            q = int(np.flatnonzero(bad)[0])
            raise EstimatorError(
                f"{where}: {name}: the estimate {q}'s swing per innovation ({swing[q]:.3g}) "
                f"is more than {ABSURD:g} times its stated std kf_std[{q}] ({std[q]:.3g}): "
                "an absurd gain (or std)")
