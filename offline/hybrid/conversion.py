"""The hybrid model's channels through the measurement chain: the converter's conversions
of the structure's response, with the force and the correction as known inputs.

The smoother models a converter (the ADS1256, a DAQ's FIR; :mod:`offline.smoother.chain`)
by ``W`` states per channel that carry the conversions in progress; its force is a state of
its force model. In the hybrid model the force ``u`` (first-order hold between samples) and
the correction ``g`` (held over the step) are inputs, so the part of a conversion that falls
in the interval ``[t_k-1, t_k]`` is a functional of the structural state ``x_k-1`` AND of
those inputs. Both are states of a continuous system over the interval::

    x' = Ac x + Bu u + Bg g,   u' = v,   v' = 0,   g' = 0      (u(s) = u_k-1 + v s,
                                                                  v = (u_k - u_k-1) / dt)
    channel c:  C_c x + Du_c u + Dg_c g                         (an accelerometer sees u, g)

and the smoother's exact discretisation of the conversions
(:func:`offline.smoother.chain.chain_model`) of this system gives each functional ``L_q``
over ``[x, g, u, v]``. With ``a_q,k`` the part of conversion ``k + q`` up to ``t_k``::

    a_q,k = Lx_q x_k-1 + Lg_q g_k-1 + (Lu_q - Lv_q / dt) u_k-1 + (Lv_q / dt) u_k
            + a_q+1,k-1                                         (q < W - 1)
    y_k   = a_0,k + v_k

so the augmented hybrid model ``[x, a_W-1 .. a_0]`` keeps the form ``x+ = A x + B0 u + B1 u+
+ Bg g``, ``y = H x + Dg gd`` (the force's direct part is inside the conversion). What a
sensor sees of the correction directly (``Dg``: an accelerometer at its DOF) is not held but
interpolated between the mid-step values (:func:`direct_weights`), so that part of a
conversion also draws on ``g_k``: a direct term ``Dg gd_k`` as on point samples. Its ``A``
is the smoother's ``kf_A`` on the structural and chain states (the force-model states left
out: the force is an input here), so the training runs the step the edge runs; ``Lx`` from the system above equals ``kf_A``'s chain rows on the
structure to round-off (tests/test_hybrid_chain.py). Sensor dynamics (high-pass, moving
average, drift) are not modelled: refused at build
(:func:`offline.estimator_choice.chain_policy`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edge.estimator.operator import EstimatorError
from offline.smoother.chain import chain_model


def input_functionals(Ac, Bu, Bg, C, Du, dt: float, chain, nch: int):
    """``(Lx, Lg, B0c, B1c, shift)`` of the conversions (module docstring): the chain rows
    of the augmented step over the structural state ``Lx`` (nk, m), the held correction
    through the structure ``Lg`` (nk, ng; its direct part: :func:`direct_rows`), the force's
    first-order-hold weights of ``u_k-1`` and ``u_k`` (nk, nf), and the chain states' own
    block ``shift`` (nk, nk); ``nk = W nch``."""
    m, nf, ng = Ac.shape[0], Bu.shape[1], Bg.shape[1]
    nx = m + ng + 2 * nf
    Aa = np.zeros((nx, nx))
    Aa[:m, :m] = Ac
    Aa[:m, m:m + ng] = Bg
    Aa[:m, m + ng:m + ng + nf] = Bu
    Aa[m + ng:m + ng + nf, m + ng + nf:] = np.eye(nf)          # u' = v
    Ca = np.zeros((nch, nx))
    Ca[:, :m], Ca[:, m + ng:m + ng + nf] = C, Du
    taps, spacing = chain.taps()
    F, _, _ = chain_model(Aa, np.zeros((nx, nx)), Ca, dt, np.asarray(taps, float),
                          float(spacing), chain.offsets_for(nch))
    L = F[nx:, :nx]
    Lu, Lv = L[:, m + ng:m + ng + nf], L[:, m + ng + nf:]
    # u(s) = u_k-1 + (u_k - u_k-1) s / dt:  Lu u_k-1 + Lv (u_k - u_k-1) / dt
    return L[:, :m], L[:, m:m + ng], Lu - Lv / dt, Lv / dt, F[nx:, nx:]


def direct_weights(chain, dt: float, nch: int, W: int) -> np.ndarray:
    """``(nch, W + 1)``: the weight of ``g_k-j`` (``j = 0 .. W``) in conversion ``k``'s
    direct part of the correction, per unit direct term.

    The correction is evaluated at the mid-step state and held, ``g_i`` for ``t_i + dt / 2``;
    a sensor that sees it directly (an accelerometer at its DOF, the quasi-static part of the
    modes it does not load) sees the spring's force as it is at each tap, which lies between
    the values at the mid-steps: linear between them, as the point samples' mean ``(g_k +
    g_k-1) / 2`` at ``t_k`` (:data:`offline.hybrid.discrete.DIRECT`). A tap at ``s`` into the
    interval ``[t_i-1, t_i]``::

        s <= dt / 2:  g_i-2 (1/2 - s/dt) + g_i-1 (1/2 + s/dt)
        s >  dt / 2:  g_i-1 (3/2 - s/dt) + g_i (s/dt - 1/2)

    Holding ``g_k-1`` over the last interval instead read the ADS1256's window at the end of
    it (the tip accelerometer of the strip at 3,750 SPS, ``s / dt`` 0.78 on average) a third
    of a step late: with the exact cubic law the force's normalised RMS error was 0.081 /
    0.032 (two records) through the chip against 0.015 on point samples; interpolated 0.024
    / 0.015 (scratch run of tests/test_hybrid_chain.py's structure). A tap in the first half
    of the oldest interval would need ``g_k-W-1``: it takes ``g_k-W`` (held there)."""
    taps, spacing = chain.taps()
    h = np.asarray(taps, float)
    w = np.zeros((nch, W + 2))
    for c, off in enumerate(chain.offsets_for(nch)):
        lag = off + np.arange(h.size) * spacing
        q = np.minimum(np.floor(lag / dt + 1e-9).astype(int), W - 1)   # interval, 0 = last
        x = ((q + 1) * dt - lag) / dt                                   # s / dt in [0, 1]
        early = x <= 0.5
        # g_k-q-2, g_k-q-1 (early) and g_k-q-1, g_k-q (late)
        np.add.at(w[c], q[early] + 2, h[early] * (0.5 - x[early]))
        np.add.at(w[c], q[early] + 1, h[early] * (0.5 + x[early]))
        np.add.at(w[c], q[~early] + 1, h[~early] * (1.5 - x[~early]))
        np.add.at(w[c], q[~early], h[~early] * (x[~early] - 0.5))
    w[:, W] += w[:, W + 1]                       # g_k-W-1 -> g_k-W (no state carries it)
    return w[:, :W + 1]


def direct_rows(chain, dt: float, Dg: np.ndarray, W: int):
    """``(Lgd (W nch, ng), Dgd (nch, ng))``: the correction's direct part through the chain
    as the edge applies it (:func:`direct_weights`): ``g_k-j`` (``j >= 1``) into the chain
    state of conversion ``k`` at step ``k - j + 1`` (``a_j-1``: row ``(W - j) nch + c``),
    ``g_k`` as a direct term of the channel, ``Dgd gd_k`` with ``gd_k = (g_k + g_k-1) / 2``
    (its ``g_k-1`` half taken off ``a_0``'s)."""
    nch, ng = Dg.shape
    w = direct_weights(chain, dt, nch, W)
    Dgd = 2.0 * w[:, :1] * Dg
    Lgd = np.zeros((W * nch, ng))
    for j in range(1, W + 1):
        rows = (W - j) * nch + np.arange(nch)
        Lgd[rows] = w[:, j:j + 1] * Dg
    Lgd[(W - 1) * nch + np.arange(nch)] -= 0.5 * Dgd    # a_0: gd's g_k-1 half
    return Lgd, Dgd


def smoother_chain_block(bundle, m: int, nk: int):
    """``(rows on the structure (nk, m), the chain block (nk, nk))`` of the smoother's step
    ``kf_A`` (state ``[modes, force-model states, a_W-1 .. a_0]``, the chain last), or None
    for a bundle without ``kf_A``."""
    if "A" not in bundle.kf:
        return None
    As = np.asarray(bundle.kf["A"], dtype=float)
    ns = As.shape[0]
    if ns < m + nk:
        raise EstimatorError(f"kf_A of shape {As.shape} has no room for {m} modal and {nk} "
                             f"chain states")
    return As[ns - nk:, :m].copy(), As[ns - nk:, ns - nk:].copy()


def through_chain(hm, bundle, Ac, Bu, Bgc):
    """The hybrid model ``hm`` (structural state, channels ``H x + Du u + Dg gd``, ``Dg``
    with the quasi-static part of the modes the correction does not load) with the
    conversions of ``bundle.chain`` appended (module docstring): a new model with state
    ``[x, a]``, ``nk = W nch`` chain states, channels ``y = a_0 + Dg gd`` (the new ``Dg``:
    the correction's direct part from ``g_k``, :func:`direct_rows`). ``Ac, Bu, Bgc``: the
    continuous structural system and its input columns."""
    chain, nch = bundle.chain, len(bundle.channels)
    if chain.dynamic:
        raise EstimatorError("the hybrid twin does not model the sensors' dynamics "
                             "([[sensors]] highpass_hz, average_s, drift)")
    W = chain.intervals(bundle.dt, nch)
    nk = W * nch
    m = hm.A.shape[0]
    Lx, Lg, B0c, B1c, shift = input_functionals(Ac, Bu, Bgc, hm.H, hm.Du, bundle.dt, chain,
                                                nch)
    Lgd, Dgd = direct_rows(chain, bundle.dt, hm.Dg, W)
    own = smoother_chain_block(bundle, m, nk)
    if own is not None:  # the step the edge runs
        Lx, shift = own
    A = np.zeros((m + nk, m + nk))
    A[:m, :m], A[m:, :m], A[m:, m:] = hm.A, Lx, shift
    H = np.zeros((nch, m + nk))
    H[:, m + nk - nch:] = np.eye(nch)                            # y_k = a_0,k
    pad = lambda X: np.hstack([X, np.zeros((X.shape[0], nk))])  # noqa: E731
    return replace(hm, A=A, B0=np.vstack([hm.B0, B0c]), B1=np.vstack([hm.B1, B1c]),
                   Bg=np.vstack([hm.Bg, Lg + Lgd]), H=H, Du=np.zeros_like(hm.Du),
                   Dg=Dgd, Cz=pad(hm.Cz), S=pad(hm.S), nk=nk)
