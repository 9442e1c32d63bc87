"""What the records determine: weak directions of the posterior and their profile.

VB's posterior N(m, Λ⁻¹) is a local, Gaussian answer. Two zones that one sensor cannot tell
apart leave a ridge in the posterior: along it the records fit (nearly) equally well, and the
Gaussian at one point of the ridge, curved by the prior and the model's nonlinearity, can be
narrow and far from the truth. The check, on the transformed variables ξ:

1. Candidate directions. With Λ₀ = RᵀR (prior precision) and C = Λ⁻¹, the prior-whitened
   posterior covariance W = R C Rᵀ has eigenpairs (r_k, u_k): r_k is the posterior variance
   along u_k as a fraction of the prior's (1: the records taught nothing). The ``N_DIRS``
   directions with the largest r_k above ``R_MIN`` are candidates, and so is the direction
   to every other optimum the starting-point screen found.
2. Profile. Along a candidate d = R⁻¹u (one prior std per unit of t), ξ(t) = m + t d with the
   other directions refitted (trust-region least squares of the same tempered objective VB
   approximates, noise precisions at their posterior means):

       Φ(ξ) = ½ Σᵢ wᵢ E[Φᵢ] kᵢ(ξ)ᵀkᵢ(ξ) + ½ (ξ - m₀)ᵀ Λ₀ (ξ - m₀),   ΔΦ(t) = Φ(ξ(t)) - Φ(m)

   on t = ±``T_GRID`` (continuation outwards from t = 0). The profile interval is where
   ΔΦ < ½ χ²₁(0.95) = 1.92 (Raue et al. 2009, the profile likelihood of a non-identifiable
   parameter is flat).
3. Decisions. A point with ΔΦ < -1.92 is a better optimum: the caller restarts VB there (the
   answer was a wrong mode, not a finding). A profile interval that reaches |t| ≥ ``T_UNDET``
   (its 95 % half-width at least one prior std, i.e. at least half the prior's own 95 %
   half-width of 1.96) on both sides, or on one side with the other side reaching the prior's
   tail, means the direction is *not determined* by the records: the posterior covariance
   is widened along d to the profile's width, σ_d = (t₊ - t₋) / (2 · 1.96) prior stds, and the
   parameters loading on it are reported with the combination the records do determine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from offline._deps import need

R_MIN = 0.01          # r_k above this (posterior std > 0.1 prior std) is a candidate direction
R_PRIOR = 0.8         # r_k above this: the records hardly narrow the prior there (no profile:
                      # the screen's other optima, profiled below, cover distant modes)
N_DIRS = 3            # at most this many eigen-directions are profiled
T_GRID = (0.75, 1.5, 2.25, 3.0)   # prior stds along the direction (each side)
T_UNDET = 1.0         # profile 95 % half-width (prior stds) from which a direction is undetermined
DPHI = 1.92           # ½ χ²₁(0.95)
LOADING = 0.3         # |u_i| above this: parameter i takes part in direction u (unit vector)
FIT_EVALS = 6         # model runs of each profile point's refit


@dataclass
class Direction:
    """One profiled direction (``u`` in prior-whitened ξ, unit; ``d`` = R⁻¹u in ξ)."""

    source: str
    u: np.ndarray
    d: np.ndarray
    ratio: float                         # local posterior / prior variance along u
    t: list = field(default_factory=list)
    dphi: list = field(default_factory=list)
    best: tuple | None = None            # (t, ξ) of a point better than m by > DPHI
    lo: float = 0.0                      # profile interval [lo, hi] in prior stds
    hi: float = 0.0
    path: dict = field(default_factory=dict)   # t -> ξ(t) of the profile (others refitted)

    @property
    def tangent(self) -> np.ndarray:
        """dξ/dt of the profile path over its interval (the co-moving parameters included)."""
        if self.hi - self.lo <= 0:
            return self.d
        return (self.path[self.hi] - self.path[self.lo]) / (self.hi - self.lo)

    @property
    def undetermined(self) -> bool:
        if not self.t:      # not profiled: a prior-dominated direction (R_PRIOR)
            return True
        return min(-self.lo, self.hi) >= T_UNDET or (self.hi - self.lo) >= 2 * T_UNDET + T_GRID[-1]


def objective(prob, groups, noise):
    """(Φ(ξ), residual vector r(ξ) with ½|r|² = Φ, Jacobian) of the module docstring."""
    R = np.linalg.cholesky(prob.L0).T
    sw = [np.sqrt(g.weight * q.mean) for g, q in zip(groups, noise)]

    def res(xi, jac):
        k, J = prob.residuals(xi, jac=jac)
        r = np.concatenate([s * kk for s, kk in zip(sw, k)] + [R @ (xi - prob.m0)])
        Jr = np.vstack([s * JJ for s, JJ in zip(sw, J)] + [R]) if jac else None
        return r, Jr
    return res


def optimum(res_fn, res, max_nfev: int = 30):
    """``res`` moved to the minimum of Φ (its noise precisions and weights fixed) when that
    lies more than ``DPHI`` below Φ(m), with the Gauss-Newton precision there (VB's fixed
    point for fixed noise): a VB run stopped by back-tracking or ``max_iter`` on a ridge is
    otherwise profiled from a point that is not its own optimum."""
    opt = need("scipy.optimize")
    r0, _ = res_fn(res.m, False)
    try:
        sol = opt.least_squares(lambda x: res_fn(x, False)[0], res.m, jac=lambda x: res_fn(x, True)[1],
                                method="trf", max_nfev=max_nfev)
    except (ValueError, np.linalg.LinAlgError):
        return res
    if 0.5 * (sol.fun @ sol.fun) < 0.5 * (r0 @ r0) - DPHI:
        _, J = res_fn(sol.x, True)
        res.m, res.precision = sol.x, J.T @ J
    return res


def candidates(m, cov, L0, modes=(), n_model=None) -> list:
    """Weak eigen-directions of the whitened posterior and directions to other optima."""
    p = m.size
    n_model = p if n_model is None else n_model
    R = np.linalg.cholesky(L0).T
    W = R @ cov @ R.T
    r, U = np.linalg.eigh(0.5 * (W + W.T))
    out = []
    for k in np.argsort(r)[::-1][:N_DIRS]:
        u = U[:, k].copy()
        if r[k] < R_MIN or np.abs(u[:n_model]).max() < LOADING:
            continue
        u *= np.sign(u[np.argmax(np.abs(u))])
        out.append(Direction("weakest posterior direction", u, np.linalg.solve(R, u), float(r[k])))
    for label, xi in modes:
        v = R @ (np.asarray(xi, float) - m)
        n = np.linalg.norm(v)
        if n < 0.25 or any(abs(v @ c.u) / n > 0.95 for c in out):
            continue     # the same point, or a direction already on the list
        u = v / n
        out.append(Direction(f"towards the optimum from {label}", u, np.linalg.solve(R, u),
                             float(u @ W @ u)))
    return out


def profile(res_fn, m, direction: Direction, L0, grid=T_GRID) -> Direction:
    """Fill ``direction``'s profile (module docstring, step 2)."""
    opt = need("scipy.optimize")
    u, d = direction.u, direction.d
    R = np.linalg.cholesky(L0).T
    # the other directions: an orthonormal complement of u in whitened space, mapped to ξ
    Q, _ = np.linalg.qr(np.column_stack([u, np.eye(u.size)]))
    A = np.linalg.solve(R, Q[:, 1:u.size])          # ξ offset = A z
    r0, _ = res_fn(m, False)
    phi0 = 0.5 * r0 @ r0
    direction.t, direction.dphi, direction.path = [0.0], [0.0], {0.0: m.copy()}
    for sgn in (1.0, -1.0):
        z = np.zeros(A.shape[1])
        for t in grid:
            base = m + sgn * t * d

            def fun(zz, base=base):
                return res_fn(base + A @ zz, False)[0]

            def jac(zz, base=base):
                return res_fn(base + A @ zz, True)[1] @ A
            try:
                z = opt.least_squares(fun, z, jac=jac, method="trf", max_nfev=FIT_EVALS).x
                r, _ = res_fn(base + A @ z, False)
            except (ValueError, np.linalg.LinAlgError):
                break
            dphi = float(0.5 * r @ r - phi0)
            direction.t.append(sgn * t)
            direction.dphi.append(dphi)
            direction.path[sgn * t] = base + A @ z
            if dphi < -DPHI and (direction.best is None or dphi < direction.best[2]):
                direction.best = (sgn * t, base + A @ z, dphi)
            if dphi > 4 * DPHI:
                break      # well outside the interval: no need to go further
    ts, dp = np.array(direction.t), np.array(direction.dphi)
    inside = ts[dp < DPHI]
    direction.lo, direction.hi = float(inside.min()), float(inside.max())
    return direction


def analyse(prob, res, groups, modes=(), restart=None, max_restarts: int = 2):
    """Profile the weak directions of ``res`` (a :class:`VBResult` on ``prob``); restart VB
    (``restart(ξ) -> VBResult``) at a better point found on a profile. Returns (res, report):
    ``res`` with its covariance widened along the undetermined directions, ``report`` a list
    of dicts (:func:`describe`), one per undetermined direction."""
    for attempt in range(max_restarts + 1):
        fn = objective(prob, groups, res.noise)
        m_before = res.m.copy()
        res = optimum(fn, res)
        if restart is not None and not np.array_equal(res.m, m_before):
            res = restart(res.m)     # VB from the optimum: full Gauss-Newton steps again
        dirs = []
        for c in candidates(res.m, res.cov, prob.L0, modes, prob.nmodel):
            if c.source.startswith("weakest") and c.ratio >= R_PRIOR:
                # the Gaussian's own width along u, ±1.96 √r prior stds; the path is u itself
                c.lo, c.hi = -1.96 * np.sqrt(c.ratio), 1.96 * np.sqrt(c.ratio)
                c.path = {c.lo: res.m + c.lo * c.d, c.hi: res.m + c.hi * c.d}
                dirs.append(c)
            else:
                dirs.append(profile(fn, res.m, c, prob.L0))
        better = [c for c in dirs if c.best is not None]
        if not better or restart is None or attempt == max_restarts:
            break
        res = restart(min(better, key=lambda c: c.best[2]).best[1])
    undet = [c for c in dirs if c.undetermined]
    L_vb = res.precision.copy()
    C = res.cov
    R = np.linalg.cholesky(prob.L0).T
    for c in undet:
        # widen along the profile path to its width (t in prior stds along u), capped at the
        # prior's: σ_t² = min(((t₊ - t₋) / 3.92)², 1), minus what the Gaussian already has
        s2 = min(((c.hi - c.lo) / (2 * 1.96)) ** 2, 1.0)
        gap = s2 - float(c.u @ (R @ C @ R.T) @ c.u)
        if gap > 0:
            g = c.tangent
            C = C + gap * np.outer(g, g)
    res.precision = np.linalg.inv(0.5 * (C + C.T))
    groups = describe(prob, res, undet)
    taken = {n for g in groups for n in g["parameters"]}
    names = prob.names[:prob.nmodel]
    leaning = prior_dependence(prob, L_vb, [names.index(n) for n in taken])
    th, sd = prob.theta(res.m), np.sqrt(np.diag(res.cov))[:prob.nmodel]
    for i, ratio in leaning.items():
        if names[i] in taken:
            continue
        others = ", ".join(sorted(taken)) or "the other parameters"
        sd_i = float(sd[i] * abs(prob.transforms[i].dtheta_dxi(res.m[i])))
        groups.append({"parameters": [names[i]], "prior_dependent": True, "std_ratio": ratio,
                       "others": others, "text": leaning_text(names[i], th[i], sd_i, others,
                                                              ratio)})
    return res, groups, dirs


def leaning_text(name, value, std, others, ratio) -> str:
    """The line of a parameter that rests on the prior of undetermined ones."""
    return (f"{name} = {value:.4g} +- {std:.2g} rests on the prior of {others}: with their prior "
            f"{RELAX:g}x wider its posterior std grows {ratio:.1f}x; the records alone do not "
            f"separate it from them")


RELAX = 3.0           # prior std factor along the undetermined directions (prior_dependence)
LEAN = 1.5            # a parameter whose std grows more than this with them relaxed leans on them


def prior_dependence(prob, precision, idx) -> dict:
    """{i: std ratio} of the parameters whose posterior std grows by more than ``LEAN`` (the
    variance more than doubles) when the prior of the undetermined parameters ``idx`` is
    ``RELAX`` x wider: Λ' = Λ - (1 - RELAX⁻²) Λ₀[idx, idx]. Such a parameter is determined only
    given the prior on what the records do not see (a root spring that takes up the damage of
    a zone near the root that the records cannot place)."""
    idx = list(idx)
    if not idx:
        return {}
    L2 = np.array(precision, float)
    L2[np.ix_(idx, idx)] -= (1.0 - RELAX ** -2) * prob.L0[np.ix_(idx, idx)]
    try:
        c2 = np.diag(np.linalg.inv(0.5 * (L2 + L2.T)))
    except np.linalg.LinAlgError:
        return {}
    c1 = np.diag(np.linalg.inv(precision))
    out = {}
    for i in range(prob.nmodel):
        ratio = float(np.sqrt(c2[i] / c1[i])) if c2[i] > 0 else np.inf
        if i not in idx and ratio > LEAN:
            out[i] = ratio
    return out


def describe(prob, res, undet) -> list:
    """The parameters the records do not determine, and what they do determine of them.

    With Q an orthonormal basis (prior-whitened ξ) of the undetermined directions (a profiled
    one along its path, so the co-moving parameters count), parameter i is not determined when
    more than ``AXIS_SHARE`` of its whitened axis eᵢ lies in span(Q): |Qᵀeᵢ|² > AXIS_SHARE (a
    criterion that does not depend on how near-equal eigenvalues rotate their eigenvectors).
    Of the q such parameters the records determine q - rank(Q_S) combinations, those
    orthogonal to span(Q) on them; one is written out with its value and std."""
    n = prob.nmodel
    if not undet:
        return []
    names = prob.names[:n]
    th = prob.theta(res.m)
    dth = np.array([t.dtheta_dxi(x) for t, x in zip(prob.transforms, res.m[:n])])
    R = np.linalg.cholesky(prob.L0).T
    us = [R @ c.tangent / np.linalg.norm(R @ c.tangent) for c in undet]
    Q, sv, _ = np.linalg.svd(np.column_stack(us), full_matrices=False)
    Q = Q[:, sv > 1e-6 * sv[0]]
    share = np.sum(Q[:n] ** 2, axis=1)
    ix = [i for i in range(n) if share[i] > AXIS_SHARE]
    if not ix:
        return []
    who = [names[i] for i in ix]
    q = len(ix)
    QS = Q[ix]
    r = int(np.linalg.matrix_rank(QS, tol=0.3))
    out = {"parameters": who, "axis_share": {names[i]: float(share[i]) for i in ix},
           "determined_combinations": q - r}
    listing = ", ".join(who[:-1]) + (" and " if q > 1 else "") + who[-1]
    if q - r <= 0:
        # prior-level when every one keeps at least 0.8 of its prior std (whitened C)
        ratio = np.sqrt(np.diag(R @ res.cov @ R.T))[ix]
        wide = [nm for nm, x in zip(who, ratio) if x >= 0.8]
        out["text"] = (f"{listing} {'is' if q == 1 else 'are'} not determined "
                       f"{'' if q == 1 else 'individually '}by these records"
                       + (": the posterior is as wide as the prior (for a damage zone: no "
                          "evidence of damage there, nor of its absence)" if len(wide) == q else
                          f" (the posterior of {', '.join(wide)} is as wide as the prior; of the "
                          f"others read the 95 % intervals, not the point estimates)"
                          if wide else ": read their 95 % intervals, not the point estimates"))
        return [out]
    # a whitened combination on S orthogonal to span(Q_S), mapped to θ: x_i = R(ξ - m0), so a
    # functional wᵀx over S is Σ w_i (R)_ii ξ_i (diagonal prior) = Σ w_i R_ii / dθ_i · θ_i
    _, _, Vt = np.linalg.svd(QS.T)
    wx = Vt[-1]
    w = wx * np.diag(R)[ix] / dth[ix]
    w = w / w[np.argmax(np.abs(w))]
    Cth = res.cov[:n, :n] * np.outer(dth, dth)
    val = float(w @ th[ix])
    sd = float(np.sqrt(w @ Cth[np.ix_(ix, ix)] @ w))
    terms = " ".join(f"{'+' if c >= 0 else '-'} " + ("" if abs(abs(c) - 1) < 5e-3 else f"{abs(c):.2g} ")
                     + nm for c, nm in zip(w, who) if abs(c) >= 0.05).removeprefix("+ ")
    out.update(combination=dict(zip(who, map(float, w))), value=val, std=sd)
    if q == 2 and 0.8 <= abs(w[1] / w[0]) <= 1.25:
        what, other = ("sum", "difference") if w[1] * w[0] > 0 else ("difference", "sum")
        out["text"] = (f"{listing} cannot be separated by these records: their {what} {terms} = "
                       f"{val:.3g} +- {sd:.2g}, their {other} is not determined")
    else:
        out["text"] = (f"{listing} cannot be separated by these records: "
                       + (f"{q - r} combinations of them are determined, e.g. " if q - r > 1
                          else "only the combination ")
                       + f"{terms} = {val:.3g} +- {sd:.2g}"
                       + (" is determined" if q - r == 1 else ""))
    return [out]


AXIS_SHARE = 0.25     # share of a parameter's whitened axis in the undetermined span (describe)
