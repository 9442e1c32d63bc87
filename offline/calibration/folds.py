"""Groups of the model-inadequacy test: independent records, time blocks, frequency bands.

The k-fold test (paper 001 Sect. 4, :func:`offline.calibration.checks.kfold_inadequacy`)
compares the parameters calibrated on one group of data with those calibrated on the rest.
Its premise (paper 001: "a valid model should reproduce all measurements obtained with all
admissible inputs with the same set of parameters"; the data must be "truly diverse") needs
groups that are independent and excited differently:

* **independent records**: two records with the same SHA-256, or sharing samples (the first
  rows of one found verbatim in the other: cuts of one run), or with absolute time stamps that
  overlap, are refused with the pair named.
* **one long record** is cut into blocks of at least five decay times τ₁ = 1/(ζ₁ω₁) of the
  model's first mode at the prior mean (what is left of a block's response in the next one:
  e⁻⁵ < 1 % of its amplitude). Every block keeps the record's force history from its start (the
  model state at the block's start is exact); only the block's samples enter its residual.
* **frequency bands**: each record (or block) is split into a band below and a band above
  f_s = √(f₁f₂), the geometric mean of the model's first two natural frequencies, by causal
  order-4 Butterworth low- and high-pass filters applied to force AND response. The system is
  linear and at rest at the record's start, so the filtered response is exactly the response
  to the filtered force: each band is a record of another admissible input, the one that
  excites mostly mode 1 or mostly the higher modes. Sensor noise in disjoint bands is
  uncorrelated (its DFT bins are; the filters overlap only near f_s, where a lightly damped
  structure responds least). Records with the same force spectrum give a family that cannot
  contain the truth the same wrong parameters on every record (E alone against a compliant
  clamp: 65.0 GPa on both); the bands make it show (62.3 GPa from mode 1, 65.0 from mode 2).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from edge.csvio import read_table
from edge.inverse import modal
from offline._deps import need
from offline.calibration.forward import damped_matrices

BLOCK_DECAY_TIMES = 5.0
FINGERPRINT_ROWS = 32


def first_modes(setup, settings):
    """(f1, f2 [Hz] or None, ζ1) of the model at the prior mean (damping included)."""
    theta = np.array([p.transform.to_theta(p.mean) for p in settings.priors])
    M, C, K, *_ = damped_matrices(setup.pm.parts, theta)
    w2, Phi = modal(M, K)
    w = np.sqrt(np.maximum(w2, 0.0))
    # modal damping of mode 1: ζ₁ = φ₁ᵀ C φ₁ / (2 ω₁)   (mass-normalised φ)
    zeta1 = float(Phi[:, 0] @ C @ Phi[:, 0] / (2 * w[0]))
    f = w / (2 * np.pi)
    return float(f[0]), (float(f[1]) if f.size > 1 else None), zeta1


def decay_time(f1: float, zeta1: float) -> float:
    """Decay time of mode 1, τ₁ = 1 / (ζ₁ ω₁) [s] (amplitude falls by e)."""
    if not (zeta1 > 0 and f1 > 0):
        raise ValueError(f"the model's first mode has no damping (f1 = {f1:.4g} Hz, "
                         f"ζ1 = {zeta1:.3g}): its records never become independent")
    return 1.0 / (zeta1 * 2 * np.pi * f1)


def _raw(path):
    t, data, names = read_table(path, min_rows=16)
    return np.asarray(t, float), np.asarray(data, float)


def _shares_rows(a, b, rows: int = FINGERPRINT_ROWS) -> bool:
    """True when the first rows of ``b`` occur verbatim (all columns) as rows of ``a``
    (tables of different widths are not compared)."""
    if a.shape[1] != b.shape[1]:
        return False
    k = min(rows, b.shape[0])
    for i in np.flatnonzero(np.all(a == b[0], axis=1)):
        n = min(k, a.shape[0] - i)
        if n >= min(8, k) and np.array_equal(a[i:i + n], b[:n]):
            return True
    return False


def check_independent(records, paths=None) -> None:
    """Raise ValueError naming the pair when two records are not independent (module
    docstring): same SHA-256, shared samples, or overlapping absolute time stamps."""
    for i in range(len(records)):
        for j in range(i):
            if records[i].sha256 == records[j].sha256:
                raise ValueError(f"records {records[j].name} and {records[i].name} are the same "
                                 f"data (same SHA-256): the inadequacy test needs independent "
                                 f"records")
    if paths is None:
        return
    raw = [_raw(p) for p in paths]
    for i in range(len(raw)):
        for j in range(i):
            (ti, di), (tj, dj) = raw[i], raw[j]
            a, b = records[j].name, records[i].name
            if _shares_rows(di, dj) or _shares_rows(dj, di):
                raise ValueError(f"records {a} and {b} overlap (they share samples: cuts of "
                                 f"one run?): the inadequacy test needs independent records")
            # absolute time stamps (neither starts at 0) that overlap
            if ti[0] != 0 and tj[0] != 0 and ti[0] <= tj[-1] and tj[0] <= ti[-1]:
                raise ValueError(f"records {a} ({tj[0]:.6g}-{tj[-1]:.6g} s) and {b} "
                                 f"({ti[0]:.6g}-{ti[-1]:.6g} s) overlap in time: the "
                                 f"inadequacy test needs independent records")


def cut_blocks(record, tau: float, min_blocks: int = 2):
    """Blocks of ``record`` at least ``BLOCK_DECAY_TIMES`` τ long (as many as fit): copies with
    the whole force history and ``used`` restricted to the block. ValueError if fewer than
    ``min_blocks`` fit."""
    span = record.F.shape[0] * record.dt
    need_s = BLOCK_DECAY_TIMES * tau
    nb = int(np.floor(span / need_s + 1e-9))
    if nb < min_blocks:
        raise ValueError(f"the inadequacy test needs at least two independent records, or one "
                         f"record at least {min_blocks} x {BLOCK_DECAY_TIMES:g} decay times of "
                         f"the first mode = {min_blocks * need_s:.2f} s long to be cut into "
                         f"blocks (decay time 1/(ζ1 ω1) = {tau:.3f} s); {record.name} is "
                         f"{span:.2f} s")
    edges = np.linspace(0, record.F.shape[0], nb + 1).astype(int)
    out = []
    for b in range(nb):
        u = record.used[(record.used >= edges[b]) & (record.used < edges[b + 1])]
        out.append(dataclasses.replace(record, name=f"{record.name}[{edges[b] * record.dt:.2f}-"
                                       f"{edges[b + 1] * record.dt:.2f} s]", used=u))
    return out


def split_bands(record, f_split: float, order: int = 4):
    """(below, above): the record with force and response through causal Butterworth low- and
    high-pass filters at ``f_split`` [Hz] (module docstring)."""
    sig = need("scipy.signal")
    fs = 1.0 / record.dt
    if not 0 < f_split < 0.5 * fs:
        raise ValueError(f"band split at {f_split:.4g} Hz is not below the Nyquist frequency "
                         f"{0.5 * fs:.4g} Hz of {record.name}")
    out = []
    for kind, tag in (("lowpass", "below"), ("highpass", "above")):
        sos = sig.butter(order, f_split, btype=kind, fs=fs, output="sos")
        F = sig.sosfilt(sos, record.F, axis=0) if record.F.shape[1] else record.F
        Y = sig.sosfilt(sos, record.Y, axis=0)
        out.append(dataclasses.replace(record, name=f"{record.name} {tag} {f_split:.1f} Hz",
                                       F=F, Y=Y))
    return out


def fold_groups(setup, records, settings, paths=None, bands: bool = True) -> tuple[list, dict]:
    """Groups of the k-fold test and a description {f1, f2, zeta1, decay_time, f_split,
    blocks, groups (names), bands ("below"/"above"/None per group)}. Raises ValueError (before any calibration) when the records are not independent
    or fewer than two records/blocks are available."""
    f1, f2, z1 = first_modes(setup, settings)
    tau = decay_time(f1, z1)
    check_independent(records, paths)
    recs = list(records)
    blocks = False
    if len(recs) < 2:
        if not recs:
            raise ValueError("the inadequacy test needs at least two independent records")
        recs, blocks = cut_blocks(recs[0], tau), True
    nyq = 0.5 / recs[0].dt
    f_split = None
    band = [None] * len(recs)
    if bands:
        f_split = float(np.sqrt(f1 * f2)) if f2 is not None and f2 < nyq else min(2 * f1, 0.5 * nyq)
        recs = [g for r in recs for g in split_bands(r, f_split)]
        band = ["below", "above"] * (len(recs) // 2)
    info = {"f1": f1, "f2": f2, "zeta1": z1, "decay_time": tau, "f_split": f_split,
            "blocks": blocks, "groups": [g.name for g in recs], "bands": band}
    return recs, info
