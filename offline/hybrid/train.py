"""Training of ``g_theta`` through the fixed-step discretisation (paper 002: the network is
trained on the solution of the hybrid model, differentiating through the integrator).

Per record (measured forces ``U``, measured channels ``Y``), with the current network:

1. the known-input Kalman filter of the hybrid model runs over the record (``lax.scan``;
   the edge's recursion with the force measured): filtered states ``x_k|k``;
2. from every ``stride``-th filtered state the hybrid model runs open loop for ``horizon``
   samples (``lax.scan`` of ``x_k+1 = A x_k + B0 u_k + B1 u_k+1 + Bg g(S x_k)``);
3. loss: mean squared error of the predicted channels, each divided by its std.

Starting the horizons from filtered states keeps the open-loop runs short (no phase drift
over a whole record, no initial state to guess: multiple shooting); the gradient flows through
the ``horizon`` steps of the integrator (the filtered start is held fixed). L-BFGS (default)
or Adam (paper 002); validation on held-out data after every iteration; the weights of the best
validation loss are kept (early stopping).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from offline._deps import need
from offline.hybrid.discrete import DIRECT, HybridModel
from offline.hybrid.network import apply, init_params
from offline.smoother.gains import steady_gains


@dataclass
class Trained:
    """The trained correction and what the bundle and report need."""

    params: list          # [(W, b), ...] NumPy float64
    mu: np.ndarray        # (ni,) input shift
    sig: np.ndarray       # (ni,) input scale
    gs: np.ndarray        # (ng,) output scale [N or modal load]
    lo: np.ndarray        # (ni,) trained envelope, lower bound
    hi: np.ndarray        # (ni,) upper bound
    history: dict = field(default_factory=dict)   # train, val losses per epoch, best epoch
    info: dict = field(default_factory=dict)
    linear_kept: bool = True  # the correction and its slope vanish at rest

    def g(self, s):
        """The correction (NumPy) at network inputs ``s`` (..., ni)."""
        return apply(self.params, s, self.mu, self.sig, self.gs, linear_kept=self.linear_kept)


def filter_gain(hm: HybridModel, weights, U_list, rel: float = 0.1) -> np.ndarray:
    """Steady Kalman gain ``K`` (m, nch) of the linear model with the force known: process
    noise on each state ``rel^2`` times the variance of the force's one-step contribution
    ``(B0 + B1) u`` over the records (what the linear model may miss), noise ``1 / weight``."""
    W = np.concatenate([U @ (hm.B0 + hm.B1).T for U in U_list])
    q = rel ** 2 * np.var(W, axis=0) + 1e-30
    R = np.diag(1.0 / np.asarray(weights, dtype=float))
    m = hm.A.shape[0]
    _, K, *_ = steady_gains(hm.A, hm.H, np.diag(q), R, np.eye(m), 0)
    return K


def _split(records, frac: float = 0.25):
    """(train, validation) lists of (U, Y): the last record held out when there are three or
    more, else the last ``frac`` of each record."""
    if len(records) >= 3:
        return records[:-1], records[-1:]
    tr, va = [], []
    for U, Y in records:
        c = int(round((1 - frac) * U.shape[0]))
        tr.append((U[:c], Y[:c]))
        va.append((U[c:], Y[c:]))
    return tr, va


def _split_names(names, n: int):
    """Names of the (train, validation) parts of :func:`_split` for records named ``names``."""
    names = [f"record {i + 1}" for i in range(n)] if names is None else [str(x) for x in names]
    if n >= 3:
        return names[:-1], names[-1:]
    return ([f"{x} (first 75 %)" for x in names], [f"{x} (last 25 %)" for x in names])


def check_base(base_tr, base_va, names, n: int) -> None:
    """The linear model's loss on every training and validation part must be finite and
    positive (it normalises each part's loss); else ``ValueError`` naming the record."""
    n_tr, n_va = _split_names(names, n)
    for what, base, nm in (("training", base_tr, n_tr), ("validation", base_va, n_va)):
        for b, x in zip(base, nm):
            if not (np.isfinite(b) and b > 0):
                raise ValueError(f"{x}: the linear model's {what} loss on it is {b:g} (not a "
                                 f"finite positive number): values too large or too small for "
                                 f"the training (check the units of its columns)")


def _input_scaling(hm: HybridModel, K, records):
    """Paper 002 scaling: the network's inputs to mean 0 / std 1 (on the linear filter's
    states), its outputs' scale, and each channel's std. ``(mu, sig, gs, ystd)``."""
    X0 = [_linear_filter(hm, K, U, Y) for U, Y in records]
    Sx = np.concatenate([X @ hm.S.T for X in X0])
    mu, sig = Sx.mean(axis=0), Sx.std(axis=0) + 1e-30
    gs = _output_scale(hm, np.concatenate([U for U, _ in records]))
    ystd = np.concatenate([Y for _, Y in records]).std(axis=0) + 1e-30
    return mu, sig, gs, ystd


def _losses(jax, jnp, hm: HybridModel, K, hs, scaling):
    """The hybrid filter and the horizon losses as JAX functions of the weights ``P``:
    ``(run_filter(P, U, Y) -> (XF, G), window_losses(P, U, Y) -> (nw,))``."""
    A, B0, B1, Bg, H, Du, Dg, S = (jnp.asarray(a) for a in (
        hm.A, hm.B0, hm.B1, hm.Bg, hm.H, hm.Du, hm.Dg, hm.S))
    Kj = jnp.asarray(K)
    muj, sigj, gsj, ysj = (jnp.asarray(v) for v in scaling)
    h, stride = int(hs.horizon), int(hs.stride)

    def g(P, s):
        return apply(P, s, muj, sigj, gsj, xp=jnp, linear_kept=hs.linear_kept)

    def run_filter(P, U, Y):
        # as the edge: g at the filtered state by the linear part's innovation e0,
        # x_k|k = x + K e,  e = e0 - Dg gd,  gd = w0 g_k + w1 g_k-1;
        # x+ = A x_k|k + B0 u + B1 u+ + Bg g_k
        def step(carry, inp):
            x, gp = carry
            u, u1, y = inp
            e0 = y - H @ x - Du @ u
            gk = g(P, S @ (x + Kj @ e0))
            e = e0 - Dg @ (DIRECT[0] * gk + DIRECT[1] * gp)
            xf = x + Kj @ e
            return (A @ xf + B0 @ u + B1 @ u1 + Bg @ gk, gk), (xf, gk)
        U1 = jnp.concatenate([U[1:], U[-1:]])
        c0 = (jnp.zeros(A.shape[0]), jnp.zeros(Bg.shape[1]))
        _, (XF, G) = jax.lax.scan(step, c0, (U, U1, Y))
        return XF, G

    def horizon_loss(P, x0, g0, U, Y):
        Yp = _open_loop(jax, (A, B0, B1, Bg, H, Du, Dg, S), lambda s: g(P, s), x0, U, g0)
        return jnp.mean(((Yp - Y[:-1]) / ysj) ** 2)

    def window_losses(P, U, Y):  # (nw,) the horizon loss of each window of a record
        XF, G = jax.lax.stop_gradient(run_filter(P, U, Y))
        starts = np.arange(0, U.shape[0] - h - 1, stride)
        idx = starts[:, None] + np.arange(h + 1)[None, :]
        # the hold before each start (g_-1 = 0 at rest)
        Gp = jnp.concatenate([jnp.zeros((1, G.shape[1])), G[:-1]])[starts]
        return jax.vmap(horizon_loss, in_axes=(None, 0, 0, 0, 0))(P, XF[starts], Gp, U[idx],
                                                                  Y[idx])

    return run_filter, window_losses


def _fit_one(P0, hs, grad, loss_va, linear_va: float, progress, jnp, opt) -> dict:
    """One start: Adam or L-BFGS from ``P0``, stopped after ``hs.patience`` epochs without a
    better validation loss; the weights of its best one (``rec["P"]``, ``"best"``, ``"ep"``)
    and the losses of every epoch (``"train"``, ``"val"``)."""
    rec = {"best": np.inf, "P": P0, "ep": 0, "train": [], "val": []}

    def seen(P, val):  # one epoch (Adam step or L-BFGS iteration): validation, best so far
        va = float(loss_va(P))
        ep = len(rec["train"])
        rec["train"].append(float(val))
        rec["val"].append(va)
        if va < rec["best"]:
            rec.update(best=va, P=P, ep=ep)
        if progress and ep % 25 == 0:
            progress(f"epoch {ep}: training loss {float(val):.4g}, validation {va:.4g} "
                     f"(linear {linear_va:.4g})")
        return ep - rec["ep"] >= hs.patience

    if hs.optimizer == "adam":
        init, update, get = opt.adam(hs.learning_rate)
        state = init(P0)
        for ep in range(int(hs.epochs)):
            P = get(state)
            val, gr = grad(P)
            state = update(ep, gr, state)
            if seen(P, val):
                break
    else:  # L-BFGS (scipy) on the flattened weights, the same loss and gradient
        ravel = need("jax.flatten_util").ravel_pytree
        v0, unravel = ravel(P0)

        def fun(v):
            val, gr = grad(unravel(jnp.asarray(v)))
            return float(val), np.asarray(ravel(gr)[0], dtype=float)

        def cb(intermediate_result):
            if seen(unravel(jnp.asarray(intermediate_result.x)), intermediate_result.fun):
                raise StopIteration
        res = need("scipy.optimize").minimize(
            fun, np.asarray(v0), jac=True, method="L-BFGS-B", callback=cb,
            options={"maxiter": int(hs.epochs), "ftol": 1e-12, "gtol": 1e-12})
        rec["message"] = f"L-BFGS: {res.message}"
        if progress:
            progress(rec["message"])
    return rec


def _initial(jnp, hm: HybridModel, hs, seed: int):
    return [(jnp.asarray(W), jnp.asarray(b)) for W, b in
            init_params(hm.n_inputs, hm.n_g, hs.hidden, hs.layers, seed)]


def train(hm: HybridModel, records, weights, hs, progress=None, names=None) -> Trained:
    """Train ``g_theta`` on ``records`` (list of ``(U (nt, nf), Y (nt, nch))``) through the
    hybrid model ``hm``; ``weights`` the channels' 1 / noise variance, ``hs`` a
    :class:`offline.hybrid.spec.HybridSpec`. ``progress``: a callable taking a line;
    ``names``: the records' names (files) for the errors. A record on which the linear
    model's loss is not finite is ``ValueError`` naming it; the result's ``history["val"]``
    is empty when no iteration completed (:func:`offline.hybrid.attach.attach_hybrid`
    refuses it)."""
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = need("jax.numpy")
    opt = need("jax.example_libraries.optimizers")
    t0 = time.perf_counter()
    K = filter_gain(hm, weights, [U for U, _ in records])
    mu, sig, gs, ystd = _input_scaling(hm, K, records)
    train_set, val_set = _split(records)
    h, stride = int(hs.horizon), int(hs.stride)
    short = min(U.shape[0] for U, _ in train_set + val_set)
    if short <= h + 1:
        raise ValueError(f"[hybrid] horizon = {h} samples needs records (and their held-out "
                         f"parts) longer than {h + 1} samples; the shortest has {short}")
    run_filter, window_losses = _losses(jax, jnp, hm, K, hs, (mu, sig, gs, ystd))
    P0 = _initial(jnp, hm, hs, hs.seed)

    # each record's loss relative to the linear model's on it (1 = linear): every level counts
    def raw(P, sets):
        return [jnp.mean(window_losses(P, jnp.asarray(U), jnp.asarray(Y))) for U, Y in sets]

    base_tr = [float(v) for v in raw(_zero(P0), train_set)]
    base_va = [float(v) for v in raw(_zero(P0), val_set)]
    check_base(base_tr, base_va, names, len(records))

    def total(P, sets, base):
        return sum(v / b for v, b in zip(raw(P, sets), base)) / len(sets)

    loss_tr = jax.jit(lambda P: total(P, train_set, base_tr))
    loss_va = jax.jit(lambda P: total(P, val_set, base_va))
    grad = jax.jit(jax.value_and_grad(lambda P: total(P, train_set, base_tr)))
    linear_va = float(loss_va(_zero(P0)))
    # restarts from other initial weights (seed, seed + 1, ...): the lowest validation loss
    rec = None
    for r in range(int(hs.restarts)):
        out = _fit_one(_initial(jnp, hm, hs, hs.seed + r), hs, grad, loss_va, linear_va,
                       progress, jnp, opt)
        if progress and hs.restarts > 1:
            progress(f"start {r + 1} of {hs.restarts} (seed {hs.seed + r}): best validation "
                     f"{out['best']:.4g} at epoch {out['ep']}")
        if rec is None or out["best"] < rec["best"]:
            rec = {**out, "seed": hs.seed + r}
    best_P = rec["P"]
    params = [(np.asarray(W), np.asarray(b)) for W, b in best_P]
    # the trained envelope: the network inputs on the training records' hybrid-filtered states
    Sx = np.concatenate([np.asarray(run_filter(best_P, jnp.asarray(U), jnp.asarray(Y))[0])
                         @ hm.S.T for U, Y in train_set])
    lo, hi = Sx.min(axis=0), Sx.max(axis=0)
    pad = hs.margin * (hi - lo)

    def per_window(P, U, Y):
        return np.asarray(window_losses(P, jnp.asarray(U), jnp.asarray(Y)))

    val_se = val_spread([(per_window(best_P, U, Y), per_window(_zero(P0), U, Y))
                         for U, Y in val_set], base_va, h, stride)
    return Trained(params=params, mu=mu, sig=sig, gs=gs, lo=lo - pad, hi=hi + pad,
                   linear_kept=hs.linear_kept,
                   history={"train": rec["train"], "val": rec["val"], "best_epoch": rec["ep"],
                            "linear_val": linear_va, "best_val": float(rec["best"]),
                            "linear_train": float(loss_tr(_zero(P0))),
                            "seed": rec["seed"], "message": rec.get("message", ""),
                            "val_se": val_se},
                   info={"seconds": time.perf_counter() - t0, "epochs": len(rec["train"]),
                         "filter_gain": K})


def _open_loop(jax, mats, g, x0, U, g0=None):
    """Channels predicted by the hybrid model from ``x0`` (and the hold before it, ``g0``,
    default 0) for the samples 0..nt-2 of ``U`` (``lax.scan``; ``mats`` = A, B0, B1, Bg, H,
    Du, Dg, S as JAX arrays)."""
    A, B0, B1, Bg, H, Du, Dg, S = mats
    g0 = jax.numpy.zeros(Bg.shape[1]) if g0 is None else g0

    def step(carry, inp):
        x, gp = carry
        u, u1 = inp
        gk = g(S @ x)
        # y_k = H x_k + Du u_k + Dg (w0 g_k + w1 g_k-1);  x_k+1 = A x_k + B0 u_k + B1 u_k+1
        # + Bg g_k
        y = H @ x + Du @ u + Dg @ (DIRECT[0] * gk + DIRECT[1] * gp)
        return (A @ x + B0 @ u + B1 @ u1 + Bg @ gk, gk), y
    _, Yp = jax.lax.scan(step, (x0, g0), (U[:-1], U[1:]))
    return Yp


def open_loop(hm: HybridModel, tr: Trained, U, x0=None) -> np.ndarray:
    """The JAX integrator of the training on its own: channels (nt-1, nch) of the hybrid
    model with the network of ``tr`` driven by ``U`` from ``x0`` (default rest)."""
    jax = need("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = need("jax.numpy")
    mats = tuple(jnp.asarray(a) for a in (hm.A, hm.B0, hm.B1, hm.Bg, hm.H, hm.Du, hm.Dg, hm.S))
    P = [(jnp.asarray(W), jnp.asarray(b)) for W, b in tr.params]

    def g(s):
        return apply(P, s, tr.mu, tr.sig, tr.gs, xp=jnp, linear_kept=tr.linear_kept)
    x0 = jnp.zeros(hm.A.shape[0]) if x0 is None else jnp.asarray(x0)
    return np.asarray(_open_loop(jax, mats, g, x0, jnp.asarray(U)))


def val_spread(pairs, base, h: int, stride: int) -> float:
    """Standard error of the validation loss ratio (``best_val / linear_val``, each record's
    part ``R_r = mean(L_net) / mean(L_lin)`` over its ``nw`` windows) by the delta method of a
    ratio of means: ``se_r = std(L_net,i - R_r L_lin,i) / (sqrt(n_eff) mean(L_lin))``. A
    network that improves every window in proportion has residuals near 0 (a measurable
    improvement); one that fits noise has residuals of the noise's size. Windows that overlap
    (stride <= horizon) are not independent: ``n_eff = nw * min(1, stride / (h + 1))``. With
    ``nr`` records (the loss is the records' mean of ``R_r``): ``se = sqrt(sum_r se_r^2) /
    nr``. ``pairs``: ``(L_net (nw,), L_lin (nw,))`` per record; ``base``: each record's
    linear loss (``mean(L_lin)``)."""
    var = 0.0
    for (ln, ll), b in zip(pairs, base):
        ln, ll = np.asarray(ln, float), np.asarray(ll, float)
        if ln.size < 2:
            return float("inf")
        R = ln.mean() / b
        n_eff = max(1.0, ln.size * min(1.0, stride / (h + 1)))
        var += float(np.var(ln - R * ll, ddof=1)) / b ** 2 / n_eff
    return float(np.sqrt(var) / max(len(pairs), 1))


def _zero(P):
    """The same network with a zero last layer: g = 0, the linear model."""
    *hid, (W, b) = P
    return [*hid, (W * 0.0, b * 0.0)]


def _output_scale(hm: HybridModel, U) -> np.ndarray:
    """(ng,) post-processing scale (paper 002): the RMS of the largest force for a correction
    at physical DOFs, the RMS of each mode's load for a modal correction."""
    if hm.where == "dofs":
        return np.full(hm.n_g, max(float(np.max(np.sqrt(np.mean(U ** 2, axis=0)))), 1e-12))
    L = U @ hm.PhiB.T @ np.linalg.pinv(hm.Gm).T
    return np.maximum(np.sqrt(np.mean(L ** 2, axis=0)), 1e-12)


def _linear_filter(hm: HybridModel, K, U, Y) -> np.ndarray:
    """Filtered states ``x_k|k`` (nt, m) of the linear model with the force known (NumPy)."""
    nt = U.shape[0]
    X = np.zeros((nt, hm.A.shape[0]))
    x = np.zeros(hm.A.shape[0])
    for k in range(nt):
        e = Y[k] - hm.H @ x - hm.Du @ U[k]
        X[k] = x + K @ e
        if k + 1 < nt:
            x = hm.A @ X[k] + hm.B0 @ U[k] + hm.B1 @ U[k + 1]
    return X
