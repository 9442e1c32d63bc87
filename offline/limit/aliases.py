"""The spectra of sampled sequences: the alias images folded onto the rows' band.

The truth the limit is the MMSE of is the forces and outputs at the rows ``t_k = k dt``:
point samples of continuous processes, not band-limited ones. A load model
(:class:`offline.load.LoadModel`: Butterworth roll-offs, resonators) has power above half
the row rate, and so have the responses of modes above it; sampling folds it onto the rows'
band. With ``f_m = f + m fs`` (``fs = 1 / dt``, ``|f| <= fs / 2``) the spectra of the sampled
channels ``y``, forces ``F`` and outputs ``z`` are::

    S_yy(f) = sum_m H(f_m) P(f_m) H(f_m)^H + R                      (noise white per row)
    S_qy(f) = sum_m T(f_m) P(f_m) H(f_m)^H,   T = [I; H_z]          (targets q = [F; z])
    S_qq(f) = sum_m T(f_m) P(f_m) T(f_m)^H

``H`` includes each channel's conversion response ``G_c(f_m)`` (a converter's averaging
attenuates the images; :meth:`edge.acquisition.Chain.response`). The sums are one power
matrix of images: the loads at each image are separate "loads" (block diagonal ``P``,
independent across images), the channels see ``[H(f_-M) ... H(f_M)]`` and each target is
``T`` over them; the joint spectrum of ``[y; q]`` they make is handed on in its eigen form
(:func:`_compact`), so the Wiener and fixed-lag machinery of :mod:`offline.limit.wiener` is
unchanged, the forces becoming target rows. ``H(-f) = conj(H(f))``; ``P`` is real (no phase
between the loads), ``P(-f) = P(f)``.

Without the images (before) the limit of the free-free receiver of ``offline.load.zoo``
(ten accelerometers, 400 rows/s, point samples, loads rolling off at order 2 from 160 Hz)
was 6-8 % low on its forces and moments and a quarter low on a mid-span acceleration whose
293 Hz mode holds 0.3 % of its variance: the smoother designed with the TRUE load model was
at 1.05-1.09x and 1.50x of it, at 0.97-1.01x and 1.07x of the folded one (docs/load.md
"Measured"; tests/test_limit_aliases.py).
"""

from __future__ import annotations

import numpy as np

from offline.limit.wiener import WienerLimit

#: an image pair (``+/- m``) is the last when it adds less than this share of every channel's
#: and target's power in the rows' band: the converter's averaging (the ADS1256) attenuates
#: the images, point samples of accelerations do not (a force rolling off at order 2 puts
#: ``~ m^-4`` of its power into image ``m``, which an accelerometer sees directly)
IMAGE_TOL = 1e-4
#: at most this many images on each side (``|m| <= MAX_IMAGES``)
MAX_IMAGES = 8


def folds(loads) -> bool:
    """A load model with a spectral density (:meth:`offline.load.LoadModel.psd`) has power
    at every frequency; the ``[design_load]`` spectra (flat bands, lines) do not fold."""
    return hasattr(loads, "psd")


def _image(mm, kinds, nch, loads, dt, n, chain, m):
    """``(H, P)`` of image ``m`` on the one-sided bins: ``H(f + m fs)``, ``P(f + m fs)``."""
    fr = np.fft.rfftfreq(n, dt)
    a = np.abs(fr + m / dt)                     # |f_m|: H(-f) = conj H(f), P(-f) = P(f)
    H = mm.transfer(a, kinds)
    if chain is not None and not chain.point:
        H[:, :nch] *= chain.response(a, nch)[:, :, None]
    P = np.zeros((fr.size, len(loads.forces), len(loads.forces)))
    pos = a > 0                                 # DC excluded: forces have zero mean
    # two-sided power per bin = S(f) / (n dt)                (LoadModel.power_per_bin)
    P[pos] = loads.psd(a[pos]) / (n * dt)
    return (np.conj(H) if m < 0 else H), P


def _power(H, P, nf: int) -> np.ndarray:
    """Each channel's and target's power over the bins: ``sum_k diag(T P T^H)``, ``T = [H;
    I]`` (the forces' own power last)."""
    hp = np.real(np.einsum("kcj,kjl,kcl->c", H, P, np.conj(H)))
    return np.concatenate([hp, np.real(np.einsum("kjj->j", P))[:nf]])


def folded_grid(mm, kinds, nch: int, loads, dt: float, n: int, chain=None):
    """``(Hy, Hz, P)`` on the one-sided bins of an n-point grid, the images folded (module
    docstring) up to the first pair that adds less than :data:`IMAGE_TOL` of every power in
    the band, in the eigen form of :func:`_compact`: ``Hy`` (nb, nch, r), ``Hz`` (nb, nf +
    nout, r) the targets (forces first), ``P = I`` (nb, r, r)."""
    G, P = image_stack(mm, kinds, nch, loads, dt, n, chain)
    return _compact(G, P, nch)


def image_stack(mm, kinds, nch: int, loads, dt: float, n: int, chain=None,
                images: int | None = None):
    """``(G, P)``: ``G`` (nb, nch + nf + nout, nf K) the channels' then the targets' transfer
    from the loads at each image (forces ``[I ... I]``), ``P`` (nb, nf K, nf K) block
    diagonal; ``images`` pairs, or (None) up to the first that adds less than
    :data:`IMAGE_TOL` of every power in the band."""
    nf = len(loads.forces)
    parts = [_image(mm, kinds, nch, loads, dt, n, chain, 0)]
    base = _power(*parts[0], nf)
    for m in range(1, (MAX_IMAGES if images is None else images) + 1):
        pair = [_image(mm, kinds, nch, loads, dt, n, chain, s * m) for s in (-1, 1)]
        parts += pair
        added = _power(*pair[0], nf) + _power(*pair[1], nf)
        if images is None and np.all(added <= IMAGE_TOL * np.maximum(base, 1e-300)):
            break
    nb, K = parts[0][1].shape[0], len(parts)
    H = np.concatenate([h for h, _ in parts], axis=2)
    Pb = np.zeros((nb, nf * K, nf * K))
    for i, (_, P) in enumerate(parts):
        Pb[:, i * nf:(i + 1) * nf, i * nf:(i + 1) * nf] = P
    # F(t_k) = sum_m F_m: the force rows of T are [I ... I]
    If = np.broadcast_to(np.tile(np.eye(nf), (1, K)), (nb, nf, nf * K))
    return np.concatenate([H[:, :nch], If, H[:, nch:]], axis=1), Pb


def _compact(G, P, nch: int):
    """The same second-order statistics with as many loads as channels and targets: the
    joint spectrum ``S = G P G^H`` of ``[y; q]`` per bin as ``L L^H`` (``L = V diag(
    lambda)^1/2``, its eigen form), the loads white with ``P = I`` (the limit depends on
    ``S_yy``, ``S_qy``, ``S_qq`` alone; the images' loads, ``nf K`` of them, made every
    fixed-lag limit ``K`` times the work)."""
    S = G @ P @ np.conj(np.transpose(G, (0, 2, 1)))
    lam, V = np.linalg.eigh(0.5 * (S + np.conj(np.transpose(S, (0, 2, 1)))))
    L = V * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]
    eye = np.broadcast_to(np.eye(L.shape[2]), (L.shape[0], L.shape[2], L.shape[2]))
    return L[:, :nch], L[:, nch:], np.ascontiguousarray(eye)


def as_targets(d: dict, nf: int) -> dict:
    """A fixed-lag result of :mod:`offline.limit.wiener` on a folded grid with its forces and
    outputs read from the target rows (the image loads' own rows dropped)."""
    e, v = d["output_err"], d["output_var"]
    return {**d, "force_err": e[:, :nf], "output_err": e[:, nf:], "force_var": v[:nf],
            "output_var": v[nf:]}


def targets_limit(lim: WienerLimit, nf: int) -> WienerLimit:
    """:func:`as_targets` of a non-causal limit (no per-bin force error on a folded grid)."""
    return WienerLimit(force_var=lim.output_var[:nf], force_err=lim.output_err[:nf],
                       output_var=lim.output_var[nf:], output_err=lim.output_err[nf:],
                       force_err_psd=None)


def target_rows(loads, nf: int):
    """The function that reads a limit's forces and outputs (:func:`as_targets`,
    :func:`targets_limit`) when ``loads`` fold (:func:`folds`), else the identity."""
    if not folds(loads):
        return lambda r: r
    return lambda r: targets_limit(r, nf) if isinstance(r, WienerLimit) else as_targets(r, nf)
