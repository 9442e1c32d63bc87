"""Source components of a load (:class:`offline.forcing.component.Component`) from records:
where they are (the forces' spectra the records imply, the structure's resonances divided
out) and how sure the records are of their directions (the Laplace posterior)."""

from __future__ import annotations

import numpy as np

from offline.forcing.component import Component


def force_domain_spectra(W, noise, scale, rcond: float = 0.1):
    """The forces' cross-spectra the records imply with no load model, and the part of
    them that is the sensors' noise, per bin ``(f (nb,), S (nb, nf, nf), N (nb, nf, nf))``:
    the noise-whitened pseudo-inverse of the structure's transfer functions applied to the
    records' excess over the noise (the structure's own resonances divided out)::

        H_w = N^-1/2 H D,   S_w = N^-1/2 (S_hat - N) N^-1/2,   P = H_w^+
        S_ff = D P S_w P^H D,   N_ff = D P P^H D

    ``D = diag(scale)`` (each force's declared PSD^1/2) and ``P`` keeps the singular values
    above ``rcond`` (a force direction whose declared size moves the sensors far less than
    their noise is left out: it would only amplify the noise)."""
    c = W.centres
    nrm = 1.0 / np.sqrt(np.asarray(noise) ** 2 * W.dt)                # (nch,)
    Hw = nrm[None, :, None] * W.H[c] * np.asarray(scale)[None, None, :]
    Sw = nrm[None, :, None] * W.S_hat * nrm[None, None, :] - np.eye(nrm.size)[None]
    U, s, Vh = np.linalg.svd(Hw, full_matrices=False)
    inv = np.where(s > rcond, 1.0 / np.maximum(s, 1e-300), 0.0)
    P = np.conj(np.transpose(Vh, (0, 2, 1))) @ (inv[:, :, None]
                                                * np.conj(np.transpose(U, (0, 2, 1))))
    PH = np.conj(np.transpose(P, (0, 2, 1)))
    DD = np.outer(scale, scale)[None]
    return W.f_fine[c], DD * (P @ Sw @ PH), DD * (P @ PH)


def candidates(W, noise, scale, n_max: int, min_ratio=8.0):
    """Source components where the forces' spectra implied by the records
    (:func:`force_domain_spectra`) peak: local maxima of ``max_j S_jj(f) / median_f
    S_jj`` over the forces the records identify (median ``S_jj`` above the noise's part)
    at least ``min_ratio``, each outside the half-power band of a higher one, the ``n_max``
    highest. Direction: the principal eigenvector at the peak, its phase aligned, scaled
    by the window-smoothed resonance there; damping from the half-power width."""
    f_bins, S, N = force_domain_spectra(W, noise, scale)
    d = np.real(np.einsum("kii->ki", S))
    d = np.apply_along_axis(lambda x: np.convolve(x, np.ones(3) / 3, mode="same"), 0, d)
    med = np.median(d, axis=0)
    seen = med > np.median(np.real(np.einsum("kii->ki", N)), axis=0)
    if not np.any(seen):
        return []
    ratio = np.max(d[:, seen] / np.maximum(med[seen], 1e-300), axis=1)
    peaks = [k for k in range(1, ratio.size - 1)
             if ratio[k] >= min_ratio and ratio[k] >= ratio[k - 1] and ratio[k] > ratio[k + 1]]
    out, taken = [], np.zeros(ratio.size, bool)
    for k in sorted(peaks, key=lambda i: -ratio[i]):
        if taken[k] or len(out) == n_max:
            continue
        half = ratio > 0.5 * ratio[k]
        a = b = k
        while a > 0 and half[a - 1]:
            a -= 1
        while b < ratio.size - 1 and half[b + 1]:
            b += 1
        taken[a:b + 1] = True
        f0 = float(f_bins[k])
        zeta = float(np.clip(max(float(f_bins[b] - f_bins[a]), float(f_bins[1] - f_bins[0]))
                             / (2 * f0), 0.005, 0.2))
        lam, V = np.linalg.eigh(S[k])
        u = V[:, -1] * np.sqrt(max(lam[-1], 0.0))
        u = u * np.exp(-1j * np.angle(u[np.argmax(np.abs(u) / np.asarray(scale))]))
        # the model at bin k: |h|^2 (smoothed by the window kernel) v v^T
        i0 = k * W.over
        h2 = float(np.dot(W.kernel, Component(f0, zeta, ()).h2(W.f_fine[i0:i0 + len(W.kernel)])))
        out.append(Component(f0, zeta, tuple(float(x) for x in np.real(u) / np.sqrt(h2))))
    return sorted(out, key=lambda q: q.f0)


def direction_uncertainty(L, cov, comps, rank: int = 2, floor: float = 0.01):
    """Each component's direction as the estimator uses it: the entries the records fix
    (posterior std below half the prior's) at their fit, the others at their prior mean
    (zero: what the records cannot tell stays at the declaration), and components of the
    same resonance that carry the second moment of the unfixed entries, so that the
    estimator uses the load spectrum expected over the posterior (Laplace)::

        E[v v^T] = v_fix v_fix^T + sum_i lam_i u_i u_i^T,
        sum_i lam_i u_i u_i^T = (v_hat v_hat^T + Sigma_v) on the unfixed entries

    each of the ``rank`` largest ``lam_i`` above ``floor |v_hat|^2`` (both in units of each
    force's declared size) along ``sqrt(lam_i) u_i``. A direction the records do not fix (a
    force and a moment at one node) then adds incoherent power where the sensors are blind
    instead of a coherence that the estimator would trust.

    Returns ``(components, uncertainty components)``."""
    kept, out = [], []
    D = np.asarray(L.vscale)
    for m, c in enumerate(comps):
        idx = [L.index(f"cv{m}_{j}") for j in range(L.nf)]
        free = np.sqrt(np.clip(np.diag(cov)[idx], 0.0, None)) >= 0.5 * np.asarray(L.sd)[idx]
        v = np.asarray(c.v) / D                 # in units of each force's declared size
        M = (cov[np.ix_(idx, idx)] + np.outer(v, v)) * np.outer(free, free)
        kept.append(Component(c.f0, c.zeta, tuple(float(x) for x in D * np.where(free, 0.0, v))))
        lam, U = np.linalg.eigh(M)
        for i in np.argsort(lam)[::-1][:rank]:
            if lam[i] > floor * float(np.sum(v ** 2)):
                out.append(Component(c.f0, c.zeta, tuple(float(x) for x in
                                                         D * np.sqrt(lam[i]) * U[:, i])))
    return kept, out
