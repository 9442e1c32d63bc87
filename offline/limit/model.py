"""The accuracy limit of a model file: ``vsense-offline limit MODEL.toml``.

The full FE model's transfer functions (:mod:`offline.limit.transfer`), the force spectra of
the ``[calibration]`` load(s) times each ``[[forces]] scale``, the sensors' ``noise`` (paper
eq. 28, relative to each channel's standard deviation under that load) give the MMSE limit of
every force and output, non-causal and at the delays asked for (:mod:`offline.limit.wiener`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.bundle import KINDS
from offline.limit.transfer import ForceSpectrum, modal_model, power_per_bin
from offline.limit.wiener import fixed_lag_limit, half_weights, wiener_limit
from offline.model import build_fe_model, load_model_file, resolve_dofs

#: Relative noise floor used when a sensor declares ``noise = 0`` (as the build does).
NOISE_FLOOR = 1e-4


def force_spectra(spec) -> list[ForceSpectrum]:
    """Spectrum of each ``[[forces]]`` entry under the calibration load, times its scale.

    ``chirp`` counts as random over its band with rms ``amplitude / sqrt(2)``; without a
    ``[calibration]`` every force is random over 1 Hz .. 0.4 rate with rms = its scale.
    """
    rate = spec.estimator.rate if spec.estimator else 1000.0
    out = []
    for f in spec.forces:
        s = float(getattr(f, "scale", 1.0))
        ld = spec.calibration.load_for(f.name) if spec.calibration else None
        if spec.calibration is None:
            out.append(ForceSpectrum("random", (1.0, 0.4 * rate), s))
        elif ld is None:
            out.append(ForceSpectrum("none"))
        elif ld.type == "random":
            out.append(ForceSpectrum("random", ld.band, ld.rms * s))
        elif ld.type == "chirp":
            out.append(ForceSpectrum("random", ld.band, ld.amplitude * s / np.sqrt(2)))
        else:
            out.append(ForceSpectrum("sine", freq=ld.freq, amplitude=ld.amplitude * s))
    return out


def noise_std(spec, mm, dt: float, loads=None, noise=None, n: int = 8192) -> np.ndarray:
    """Absolute noise std of each sensor, ``level * std(y)`` (eq. 28) with ``std(y)`` the
    STATIONARY response to the load spectra (not that of one short record, which for a
    lightly damped structure started from rest is biased low). ``mm``: a ModalModel whose
    first probes are the sensors."""
    nch = len(spec.sensors)
    kinds = [KINDS.index(s.kind) for s in spec.sensors]
    fr = np.fft.rfftfreq(n, dt)
    Hy = mm.transfer(fr, kinds + [0] * (mm.Phi_out.shape[0] - nch))[:, :nch]
    loads = force_spectra(spec) if loads is None else loads
    P = np.column_stack([power_per_bin(ld, n, dt) for ld in loads])
    var_y = half_weights(n) @ np.einsum("kcj,kj->kc", np.abs(Hy) ** 2, P)
    if np.any(var_y <= 0):
        bad = [spec.sensors[i].name for i in np.flatnonzero(var_y <= 0)]
        raise ValueError(f"sensor(s) {bad} see nothing of the calibration load: no noise "
                         "level follows from a relative noise")
    return _levels(spec, noise) * np.sqrt(var_y)


def _levels(spec, noise=None) -> np.ndarray:
    nch = len(spec.sensors)
    lv = np.array([s.noise for s in spec.sensors]) if noise is None \
        else np.broadcast_to(np.asarray(noise, dtype=float), (nch,)).copy()
    return np.maximum(lv, NOISE_FLOOR)


@dataclass
class ModelLimit:
    """MMSE limit of a model file's forces and outputs (normalised RMS errors)."""

    force_names: list
    output_names: list
    force_nrmse: np.ndarray                # (nf,) non-causal
    output_nrmse: np.ndarray               # (nout,)
    delays_s: np.ndarray                   # (nl,)
    lag_force_nrmse: np.ndarray            # (nl, nf) causal with that delay
    lag_output_nrmse: np.ndarray           # (nl, nout)
    dt: float
    memory: int
    n_grid: int
    noise: np.ndarray                      # (nch,) relative level per channel
    noise_std: np.ndarray                  # (nch,) absolute std [channel unit]
    info: dict = field(default_factory=dict)

    def at_delay(self, delay_s: float) -> tuple[np.ndarray, np.ndarray]:
        """(force, output) normalised limits of the largest tabulated delay <= delay_s."""
        ok = np.flatnonzero(self.delays_s <= delay_s + 1e-12)
        if ok.size == 0:
            raise ValueError(f"no limit tabulated at or below {delay_s * 1e3:g} ms")
        i = ok[-1]
        return self.lag_force_nrmse[i], self.lag_output_nrmse[i]

    def as_dict(self) -> dict:
        return {"force_names": self.force_names, "output_names": self.output_names,
                "force_nrmse": self.force_nrmse.tolist(),
                "output_nrmse": self.output_nrmse.tolist(),
                "delays_ms": (self.delays_s * 1e3).tolist(),
                "lag_force_nrmse": self.lag_force_nrmse.tolist(),
                "lag_output_nrmse": self.lag_output_nrmse.tolist(),
                "memory": self.memory, "n_grid": self.n_grid, "noise": self.noise.tolist(),
                **self.info}

    def format(self, achieved: dict | None = None) -> str:
        """Table: one row per force/output, limit at each delay and non-causal; ``achieved``
        ``{name: nrmse}`` adds the estimator's figure and its ratio to the non-causal limit."""
        heads = [f"{d * 1e3:g} ms" for d in self.delays_s] + ["non-causal"]
        lines = ["MMSE (Wiener) limit, normalised RMS error = RMS(estimate - truth) / std(truth), "
                 "full band",
                 f"  full model {self.info.get('full_dofs', '?')} DOFs, "
                 f"{self.info.get('n_modes', '?')} modes + residual; causal limits with "
                 f"{self.memory} samples of memory; noise "
                 + ", ".join(f"{100 * v:g} %" for v in self.noise)]
        head = f"  {'':<14}" + "".join(f"{h:>12}" for h in heads)
        if achieved:
            head += f"{'estimator':>12}{'ratio':>8}"
        lines.append(head)
        rows = [(n, self.lag_force_nrmse[:, i], self.force_nrmse[i])
                for i, n in enumerate(self.force_names)]
        rows += [(n, self.lag_output_nrmse[:, i], self.output_nrmse[i])
                 for i, n in enumerate(self.output_names)]
        for name, lag, nc in rows:
            ln = f"  {name:<14}" + "".join(f"{v:>12.4g}" for v in lag) + f"{nc:>12.4g}"
            if achieved and name in achieved:
                a = achieved[name]
                ln += f"{a:>12.4g}{a / nc:>8.2f}"
            lines.append(ln)
        return "\n".join(lines)


def model_limit(spec, model=None, *, noise=None, delays=(0.0, 0.005, 0.01, 0.02, 0.1),
                n_modes: int = 80, memory: int | None = None, loads=None, mm=None,
                progress: bool = False) -> ModelLimit:
    """MMSE limit of a model file (see module docstring).

    Parameters
    ----------
    spec : ModelSpec or path
    model : FEModel, optional     the constrained full model (built when not given)
    noise : float or (nch,), optional   relative noise levels (default: each sensor's)
    delays : seconds; the causal (fixed-lag) limits are computed at these delays
    n_modes : modes of the full model (the rest enters as residual flexibility)
    memory : samples of measurement used by the causal limit (default: 2,500 / nch, <= 4,000)
    loads : list of ForceSpectrum, optional   (default :func:`force_spectra`)
    mm : ModalModel, optional   of (forces -> sensors + outputs), reused from the build
    """
    if not hasattr(spec, "sensors"):
        spec = load_model_file(spec)
    if not spec.sensors or not spec.forces:
        raise ValueError(f"{spec.where('[[sensors]]/[[forces]]')}: the limit needs at least "
                         "one sensor and one force")
    if model is None:
        model = build_fe_model(spec, progress=progress)
    rate = spec.estimator.rate if spec.estimator else 1000.0
    dt = 1.0 / rate
    cd = [resolve_dofs(model, s.select, s.dof, s.where or s.name)[0] for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.where or f.name)[0] for f in spec.forces]
    od = [resolve_dofs(model, o.select, o.dof, o.where or o.name)[0] for o in spec.outputs]
    kinds = [KINDS.index(s.kind) for s in spec.sensors] + [KINDS.index(o.kind)
                                                          for o in spec.outputs]
    nch = len(cd)
    lags = np.unique(np.round(np.asarray(delays, dtype=float) / dt).astype(int))
    M = int(memory or min(4000, max(2500 // nch, 1)))
    M = max(M, int(lags.max()) + 1)
    n = int(2 ** np.ceil(np.log2(max(8192, 4 * M))))
    if mm is None:
        mm = modal_model(model, fd, cd + od, n_modes=n_modes)
    fr = np.fft.rfftfreq(n, dt)
    H = mm.transfer(fr, kinds)
    Hy, Hz = H[:, :nch], H[:, nch:]
    loads = force_spectra(spec) if loads is None else loads
    P = np.column_stack([power_per_bin(ld, n, dt) for ld in loads])
    if not np.any(P > 0):
        raise ValueError(f"{spec.where('[calibration]')}: no force is loaded")
    levels = _levels(spec, noise)
    # sigma_c = level * std(y_c) under the load (eq. 28), stationary
    noise_var = noise_std(spec, mm, dt, loads, noise, n) ** 2
    lim = wiener_limit(Hy, P, noise_var, n, Hz=Hz)
    fl = fixed_lag_limit(Hy, P, noise_var, n, lags, M, Hz=Hz)
    with np.errstate(invalid="ignore", divide="ignore"):
        lf = np.sqrt(fl["force_err"] / fl["force_var"])
        lo = np.sqrt(fl["output_err"] / fl["output_var"])
    return ModelLimit(force_names=[f.name for f in spec.forces],
                      output_names=[o.name for o in spec.outputs],
                      force_nrmse=lim.force_nrmse, output_nrmse=lim.output_nrmse,
                      delays_s=lags * dt, lag_force_nrmse=lf, lag_output_nrmse=lo, dt=dt,
                      memory=M, n_grid=n, noise=levels, noise_std=np.sqrt(noise_var),
                      info={"full_dofs": int(model.n_dofs), "n_modes": int(mm.lam.size),
                            "n_rigid": int(mm.n_rigid),
                            "loads": [ld.__dict__ for ld in loads]})
