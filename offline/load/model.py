"""The joint load model: each force a shaping filter driven by white noise, the driving
noises correlated between forces, and each sensor's noise.

Two-sided power spectral density matrix of the forces [unit^2/Hz]::

    S_ff(f) = D(f) rho D(f)^H,   D = diag(sqrt(qc_j) H_j(j 2 pi f))

with ``H_j`` force j's shaping filter (:class:`offline.smoother.ForceModel`), ``qc_j`` its
white-noise intensity (so that ``var f_j = rms_j^2``) and ``rho`` the correlation of the
driving noises (the coherence of two forces at every frequency where both shapes are real,
e.g. the ends of one source structure). The state-space form for the smoother: the force
states of all forces stacked, driven by ``w`` with ``E[w w^T] = diag(sqrt qc) rho diag(sqrt
qc)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from offline.forcing.component import Component
from offline.forcing.force_model import ForceModel


@dataclass
class LoadModel:
    """Force spectra, their correlation and the sensor noise of one operation.

    forces : list of ForceModel, one per ``[[forces]]`` entry
    corr : (nf, nf) correlation of the driving white noises (identity: independent forces)
    noise_std : (nch,) absolute noise std of each sensor [channel unit], or None (the
        relative ``noise`` of the model file, resolved by the build)
    source : "declared" or "record"
    info : fit diagnostics (identified parameters, likelihood, notes)
    components : list of Component, modes of a source that drive all forces together
        (their spectra add to the forces' own, ``S_ff += |h|^2 v v^T``)
    """

    forces: list
    corr: np.ndarray | None = None
    noise_std: np.ndarray | None = None
    source: str = "declared"
    info: dict = field(default_factory=dict)
    components: list = field(default_factory=list)

    def __post_init__(self):
        nf = len(self.forces)
        self.corr = np.eye(nf) if self.corr is None else np.asarray(self.corr, dtype=float)
        if self.corr.shape != (nf, nf):
            raise ValueError(f"load model: corr must be ({nf}, {nf}), got {self.corr.shape}")
        if self.noise_std is not None:
            self.noise_std = np.asarray(self.noise_std, dtype=float)
        for c in self.components:
            if len(c.v) != nf:
                raise ValueError(f"load model: a component's direction has {len(c.v)} "
                                 f"entries for {nf} forces")

    def rms(self) -> np.ndarray:
        """(nf,) each force's RMS: its own shaping filter's and the components'."""
        var = np.array([fm.rms ** 2 for fm in self.forces])
        for c in self.components:
            var = var + c.variance()
        return np.sqrt(var)

    @property
    def correlated(self) -> bool:
        return bool(np.any(np.abs(self.corr - np.eye(len(self.forces))) > 1e-12))

    def psd(self, freqs) -> np.ndarray:
        """Two-sided PSD matrix ``(nfreq, nf, nf)`` [unit^2/Hz] at ``freqs`` [Hz]."""
        d = np.sqrt(np.column_stack([fm.psd(freqs) for fm in self.forces]))  # (nfreq, nf)
        S = d[:, :, None] * self.corr[None] * d[:, None, :]
        for c in self.components:
            v = np.asarray(c.v, dtype=float)
            S = S + c.h2(freqs)[:, None, None] * np.outer(v, v)[None]
        return S

    def power_per_bin(self, n: int, dt: float) -> np.ndarray:
        """Two-sided power per one-sided bin of an n-point grid ``(n // 2 + 1, nf, nf)``
        (``offline.limit``'s convention: the sum over the two-sided grid is the covariance;
        DC excluded, forces have zero mean)."""
        fr = np.fft.rfftfreq(n, dt)
        P = np.zeros((fr.size, len(self.forces), len(self.forces)))
        P[1:] = self.psd(fr[1:]) / (n * dt)
        return P

    def sample(self, t: np.ndarray, seed: int) -> np.ndarray:
        """A stationary Gaussian history ``(nt, nf)`` of the forces on the uniform grid ``t``
        (circular synthesis: white noise shaped per bin by a square root of ``S_ff``)."""
        t = np.asarray(t, dtype=float)
        nt, nf = t.size, len(self.forces)
        dt = float(t[1] - t[0])
        rng = np.random.default_rng(seed)
        W = np.fft.rfft(rng.standard_normal((nt, nf)), axis=0)       # white, PSD = dt
        fr = np.fft.rfftfreq(nt, dt)
        S = np.zeros((fr.size, nf, nf))
        S[1:] = self.psd(fr[1:]) / dt
        # S = L L^T per bin (eigen form: S may be singular for fully coherent forces)
        lam, V = np.linalg.eigh(S)
        L = V * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]
        return np.fft.irfft(np.einsum("kij,kj->ki", L, W), nt, axis=0)

    def as_meta(self) -> dict:
        """JSON form (bundle ``meta["load_model"]``)."""
        return {"source": self.source, "forces": [fm.as_dict() for fm in self.forces],
                "corr": self.corr.tolist(),
                "noise_std": None if self.noise_std is None else self.noise_std.tolist(),
                "components": [c.as_dict() for c in self.components], "info": self.info}

    @classmethod
    def from_meta(cls, d: dict) -> "LoadModel":
        return cls(forces=[ForceModel.from_dict(f) for f in d["forces"]],
                   corr=np.array(d["corr"], dtype=float),
                   noise_std=None if d.get("noise_std") is None else np.array(d["noise_std"]),
                   source=d.get("source", "declared"), info=dict(d.get("info", {})),
                   components=[Component.from_dict(c) for c in d.get("components", [])])

    @classmethod
    def from_estimator(cls, e: dict) -> "LoadModel":
        """The load model a smoother bundle's ``meta["estimator"]`` carries (its force models,
        correlation and source components; no noise)."""
        corr = e.get("force_corr")
        return cls(forces=[ForceModel.from_dict(m) for m in e["force_models"]],
                   corr=None if corr is None else np.array(corr, dtype=float),
                   components=[Component.from_dict(c) for c in e.get("force_components") or []])


def total_rms_note(e: dict) -> str:
    """With source components (``meta["estimator"]["force_components"]``) the force models'
    ``rms`` is each force's floor only: the forces' total RMS, for the summary."""
    comps = e.get("force_components") or []
    if not comps:
        return ""
    return (f" (floors) + {len(comps)} source component(s): total rms "
            + ", ".join(f"{r:.3g}" for r in LoadModel.from_estimator(e).rms()))
