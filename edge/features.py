"""Transient response features for the inverse maps (IMPU paper, file 000, Sect. 3).

The same code runs offline (training data, :mod:`offline.inverse.dataset`) and on the edge
(:mod:`edge.inverse`), so a measured window and a simulated one give identical features.
NumPy only.

A *window* is the sampled response of one experiment, shape ``(n, nch)``: row ``k`` is time
``t_k = k / rate`` [s] after the start of the known excitation (row 0 is the initial state,
identical in every experiment), column ``c`` one channel in SI units (m, m/s, m/s^2).
Features are extracted per channel and concatenated channel after channel (paper eq. 6).

Feature kinds (``KINDS``)
-------------------------
``time_samples``         every sample but t=0 (TS dense, eq. 10)
``time_samples_sparse``  ``n_samples`` equidistant samples, t=0 excluded (TS sparse, eq. 10)
``time_extrema``         values and times of the first ``n_extrema`` extrema (TE, eq. 11)
``fft_mp``               magnitude and phase of all FFT bins (MP, eq. 13)
``fft_ri``               real and imaginary parts of all FFT bins (RI, eq. 14)
``fft_mp_bins``          MP in the frequency bins of interest ``bins`` (MP (FBoI))
``fft_ri_bins``          RI in the frequency bins of interest ``bins`` (RI (FBoI))
``fft_bins``             alias of ``fft_ri_bins`` (the paper's best feature type)
``a+b``                  concatenation, e.g. ``fft_ri_bins+time_extrema`` (frequencies from the
                         FFT bins, decay from the extrema heights)

Phase and imaginary part are dropped at f = 0 and at the Nyquist bin (always zero for a real
signal). The FFT is scaled by 1/n, so ``|Y|`` is in the signal's unit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

KINDS = ("time_samples", "time_samples_sparse", "time_extrema", "fft_mp", "fft_ri",
         "fft_mp_bins", "fft_ri_bins", "fft_bins")
_ALIAS = {"fft_bins": "fft_ri_bins"}


@dataclass(frozen=True)
class FeatureConfig:
    """Settings of the feature extraction (stored in the bundle's ``meta`` as a dict).

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    n_samples : int
        Number of equidistant samples for ``time_samples_sparse``.
    n_extrema : int
        Number of extrema per channel for ``time_extrema`` (paper: at most the smallest
        number found in any training sample).
    prominence : float
        Minimum change (fraction of the channel's peak ``|y|`` in the window) between an
        extremum and the signal on both sides before it counts, so that noise gives one
        extremum per peak/trough (paper Sect. 3.1.2, Matlab ``findpeaks`` prominence).
    bins : tuple of int
        FFT bin indices of interest (0 .. n//2) for the ``*_bins`` kinds.
    """

    kind: str = "fft_ri_bins"
    n_samples: int = 32
    n_extrema: int = 8
    prominence: float = 0.05
    bins: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["bins"] = [int(b) for b in self.bins]
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "features") -> "FeatureConfig":
        if isinstance(d, FeatureConfig):
            return d
        if not isinstance(d, dict):
            raise TypeError(f"{where}: expected a table/dict of feature settings, got {type(d).__name__}")
        known = {"kind", "n_samples", "n_extrema", "prominence", "bins"}
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"{where}: unknown key(s) {bad}; expected some of {sorted(known)}")
        d = dict(d)
        if "bins" in d:
            d["bins"] = tuple(int(b) for b in d["bins"])
        return cls(**d)


def _parts(kind: str) -> list[str]:
    """A combined kind ``"a+b"`` is the concatenation of the kinds' features (paper Fig. 2)."""
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"feature kind must be a non-empty string, got {kind!r}")
    return kind.split("+")


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown feature kind {kind!r}; expected one of {', '.join(KINDS)}")
    return _ALIAS.get(kind, kind)


def _config(config, kind: str) -> FeatureConfig:
    cfg = FeatureConfig() if config is None else FeatureConfig.from_dict(config)
    if kind == "time_samples_sparse" and int(cfg.n_samples) < 1:
        raise ValueError(f"features.n_samples must be >= 1, got {cfg.n_samples}")
    if kind == "time_extrema":
        if int(cfg.n_extrema) < 1:
            raise ValueError(f"features.n_extrema must be >= 1, got {cfg.n_extrema}")
        if not (0.0 <= float(cfg.prominence) < 1.0):
            raise ValueError(f"features.prominence must be in [0, 1), got {cfg.prominence}")
    return cfg


def _check_windows(W: np.ndarray, rate: float, name: str) -> np.ndarray:
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 3:
        raise ValueError(f"{name} must be 2-D (n, nch) per window, got shape {W.shape[1:]}")
    if W.shape[1] < 4:
        raise ValueError(f"{name} has {W.shape[1]} samples; at least 4 are needed")
    if W.shape[2] < 1:
        raise ValueError(f"{name} has no channel")
    bad = ~np.isfinite(W)
    if bad.any():
        s, k, c = np.argwhere(bad)[0]
        raise ValueError(f"{name} contains {int(bad.sum())} non-finite value(s) "
                         f"(first: window {s}, sample {k}, channel {c})")
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive sample rate [Hz], got {rate!r}")
    return W


def _check_bins(bins, n: int) -> np.ndarray:
    b = np.asarray(bins, dtype=np.int64).reshape(-1)
    if b.size == 0:
        raise ValueError("features.bins is empty: the *_bins kinds need frequency bins of interest "
                         "(see bins_of_interest)")
    if b.min() < 0 or b.max() > n // 2:
        raise ValueError(f"features.bins must lie in 0..{n // 2} for a window of {n} samples, "
                         f"got {int(b.min())}..{int(b.max())}")
    return b


# --------------------------------------------------------------------------- public API
def extract(kind: str, window, rate: float, config=None) -> np.ndarray:
    """Feature vector of one window.

    Parameters
    ----------
    kind : str
        Feature kind, one of :data:`KINDS`.
    window : array_like, shape (n, nch)
        Response samples [SI], row 0 at t = 0 (start of the experiment).
    rate : float
        Sample rate [Hz].
    config : FeatureConfig or dict, optional

    Returns
    -------
    psi : ndarray, shape (n_features,)
    """
    w = np.asarray(window, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"window must have shape (n, nch), got {w.shape}")
    return extract_batch(kind, w[None], rate, config)[0]


def extract_batch(kind: str, windows, rate: float, config=None) -> np.ndarray:
    """Feature vectors of many windows (training data).

    Parameters
    ----------
    windows : array_like, shape (ns, n, nch)
    rate : float
        Sample rate [Hz].

    Returns
    -------
    Psi : ndarray, shape (ns, n_features)
    """
    if "+" in str(kind):
        W = _check_windows(windows, rate, "window")
        return np.concatenate([extract_batch(k, W, rate, config) for k in _parts(kind)], axis=1)
    k = _kind(kind)
    cfg = _config(config, k)
    W = _check_windows(windows, rate, "window")
    ns, n, nch = W.shape
    if k == "time_samples":
        # psi_TS = y[v_TS], v_TS = 1..n-1   (eq. 10, dense)
        F = W[:, 1:, :]
        return np.ascontiguousarray(F.transpose(0, 2, 1)).reshape(ns, -1)
    if k == "time_samples_sparse":
        idx = sparse_indices(n, int(cfg.n_samples))
        return np.ascontiguousarray(W[:, idx, :].transpose(0, 2, 1)).reshape(ns, -1)
    if k == "time_extrema":
        ne = int(cfg.n_extrema)
        out = np.empty((ns, nch, 2 * ne))
        for s in range(ns):
            for c in range(nch):
                out[s, c] = _extrema(W[s, :, c], rate, ne, float(cfg.prominence))
        return out.reshape(ns, -1)
    # frequency domain: Y(f_j) = F(y(t_k)) / n   (eq. 12)
    Y = np.fft.rfft(W, axis=1) / n                      # (ns, n//2+1, nch)
    nb = Y.shape[1]
    if k in ("fft_mp", "fft_ri"):
        b = np.arange(nb)
    else:
        b = np.unique(_check_bins(cfg.bins, n))
    Yb = Y[:, b, :]
    # phase/imaginary part are identically zero at f=0 and at Nyquist (n even): dropped
    inner = (b != 0) & ~((n % 2 == 0) & (b == n // 2))
    if k in ("fft_mp", "fft_mp_bins"):
        # psi_MP = [|Y[v_FT]|, angle Y[v_FT]]   (eq. 13)
        A, B = np.abs(Yb), np.angle(Yb[:, inner, :])
    else:
        # psi_RI = [Re Y[v_FT], Im Y[v_FT]]   (eq. 14)
        A, B = Yb.real, Yb.imag[:, inner, :]
    F = np.concatenate([A.transpose(0, 2, 1), B.transpose(0, 2, 1)], axis=2)  # (ns, nch, .)
    return np.ascontiguousarray(F).reshape(ns, -1)


def n_features(kind: str, n: int, nch: int, config=None) -> int:
    """Length of the feature vector for windows of ``n`` samples and ``nch`` channels."""
    if "+" in str(kind):
        return sum(n_features(k, n, nch, config) for k in _parts(kind))
    k = _kind(kind)
    cfg = _config(config, k)
    if k == "time_samples":
        per = n - 1
    elif k == "time_samples_sparse":
        per = int(cfg.n_samples)
    elif k == "time_extrema":
        per = 2 * int(cfg.n_extrema)
    else:
        b = np.arange(n // 2 + 1) if k in ("fft_mp", "fft_ri") else np.unique(_check_bins(cfg.bins, n))
        inner = (b != 0) & ~((n % 2 == 0) & (b == n // 2))
        per = b.size + int(inner.sum())
    return per * nch


def feature_labels(kind: str, n: int, nch: int, rate: float, config=None,
                   channels=None) -> list[str]:
    """Human-readable label of every feature (same order as :func:`extract`)."""
    if "+" in str(kind):
        return [lab for k in _parts(kind) for lab in feature_labels(k, n, nch, rate, config, channels)]
    k = _kind(kind)
    cfg = _config(config, k)
    chans = list(channels) if channels is not None else [f"ch{c}" for c in range(nch)]
    labels = []
    for ch in chans:
        if k == "time_samples":
            labels += [f"{ch}:y(t={i / rate:.4g})" for i in range(1, n)]
        elif k == "time_samples_sparse":
            labels += [f"{ch}:y(t={i / rate:.4g})" for i in sparse_indices(n, int(cfg.n_samples))]
        elif k == "time_extrema":
            ne = int(cfg.n_extrema)
            labels += [f"{ch}:ext{i}.y" for i in range(ne)] + [f"{ch}:ext{i}.t" for i in range(ne)]
        else:
            b = np.arange(n // 2 + 1) if k in ("fft_mp", "fft_ri") else np.unique(_check_bins(cfg.bins, n))
            inner = (b != 0) & ~((n % 2 == 0) & (b == n // 2))
            a, p = ("abs", "arg") if k.startswith("fft_mp") else ("re", "im")
            labels += [f"{ch}:{a}Y({j * rate / n:.4g}Hz)" for j in b]
            labels += [f"{ch}:{p}Y({j * rate / n:.4g}Hz)" for j in b[inner]]
    return labels


def sparse_indices(n: int, n_samples: int) -> np.ndarray:
    """Indices of ``n_samples`` equidistant samples in 1..n-1 (t = 0 excluded), last included."""
    if n_samples > n - 1:
        raise ValueError(f"features.n_samples={n_samples} exceeds the {n - 1} samples after t=0")
    return np.unique(np.round(np.linspace(0, n - 1, n_samples + 1)[1:]).astype(np.int64))


def bins_of_interest(bands, n: int, rate: float, margin: int = 2) -> np.ndarray:
    """FFT bins covering frequency bands (e.g. each resonance over the parameter box).

    Parameters
    ----------
    bands : array_like, shape (nb, 2)
        ``[f_low, f_high]`` [Hz] per band.
    n : int
        Window length [samples].
    rate : float
        Sample rate [Hz].
    margin : int
        Extra bins on each side of every band.

    Returns
    -------
    bins : ndarray of int64, sorted unique, within 0..n//2
    """
    bands = np.atleast_2d(np.asarray(bands, dtype=np.float64))
    if bands.shape[1] != 2 or not np.isfinite(bands).all():
        raise ValueError(f"bands must be finite [f_low, f_high] pairs, got shape {bands.shape}")
    df = rate / n
    out = []
    for lo, hi in bands:
        lo, hi = min(lo, hi), max(lo, hi)
        j0 = int(np.floor(lo / df)) - margin
        j1 = int(np.ceil(hi / df)) + margin
        out.append(np.arange(max(j0, 0), min(j1, n // 2) + 1))
    b = np.unique(np.concatenate(out)) if out else np.zeros(0, np.int64)
    return b.astype(np.int64)


def find_extrema(y, prominence: float) -> np.ndarray:
    """Indices of the alternating local extrema of ``y`` (one per peak/trough despite noise).

    A maximum is accepted once the signal has fallen ``prominence * max|y|`` below it (a
    minimum likewise), the hysteresis rule of Billauer's ``peakdet``. t = 0 is never an
    extremum.

    Parameters
    ----------
    y : ndarray, shape (n,)
    prominence : float
        Fraction of the peak ``|y|``.

    Returns
    -------
    idx : ndarray of int64, ascending
    """
    y = np.asarray(y, dtype=np.float64)
    delta = prominence * float(np.max(np.abs(y))) if y.size else 0.0
    idx = []
    mx, mn = -np.inf, np.inf
    imx = imn = 0
    look_max = None  # undecided until the signal has moved by delta from its start
    y0 = y[0]
    for k in range(1, y.size):
        v = y[k]
        if v > mx:
            mx, imx = v, k
        if v < mn:
            mn, imn = v, k
        if look_max is None:
            if mx - y0 > delta and v < mx - delta:
                idx.append(imx); look_max = False; mn, imn = v, k
            elif y0 - mn > delta and v > mn + delta:
                idx.append(imn); look_max = True; mx, imx = v, k
        elif look_max:
            if v < mx - delta:
                idx.append(imx); look_max = False; mn, imn = v, k
        else:
            if v > mn + delta:
                idx.append(imn); look_max = True; mx, imx = v, k
    return np.asarray(idx, dtype=np.int64)


def _extrema(y: np.ndarray, rate: float, n_extrema: int, prominence: float) -> np.ndarray:
    # psi_TE = [y[v_TE], t[v_TE]]   (eq. 11); missing extrema are NaN (caller decides)
    idx = find_extrema(y, prominence)[:n_extrema]
    out = np.full(2 * n_extrema, np.nan)
    out[:idx.size] = y[idx]
    out[n_extrema:n_extrema + idx.size] = idx / rate
    return out
