"""The accuracy limit of a model file: ``vsense-offline limit MODEL.toml``.

The full FE model's transfer functions (:mod:`offline.limit.transfer`), the force spectra of
the ``[design_load]`` load(s) times each ``[[forces]] scale``, the sensors' ``noise`` (paper
eq. 28, relative to each channel's standard deviation under that load) give the MMSE limit of
every force and output, non-causal and at the delays asked for (:mod:`offline.limit.wiener`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.kinds import kind_order
from offline.limit.aliases import folded_grid, folds, target_rows
from offline.limit.transfer import ForceSpectrum, modal_model, power_per_bin
from offline.limit.wiener import (fixed_lag_limit, half_weights, iir_fixed_lag_limit,
                                 wiener_limit)
from offline.model import (build_fe_model, load_model_file, output_probe, resolve_dofs,
                           sensor_probe)

#: Relative noise floor used when a sensor declares ``noise = 0`` (as the build does).
NOISE_FLOOR = 1e-4


def force_spectra(spec) -> list[ForceSpectrum]:
    """Spectrum of each ``[[forces]]`` entry under the calibration load, times its scale.

    ``chirp`` counts as random over its band with rms ``amplitude / sqrt(2)``; without a
    ``[design_load]`` every force is random over 1 Hz .. 0.4 rate with rms = its scale.
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


def _power(loads, n: int, dt: float) -> np.ndarray:
    """Force power per bin: ``(nb, nf)`` of ForceSpectrum entries, or ``(nb, nf, nf)`` of a
    load model (anything with ``power_per_bin``, e.g. :class:`offline.load.LoadModel`)."""
    if hasattr(loads, "power_per_bin"):
        return loads.power_per_bin(n, dt)
    return np.column_stack([power_per_bin(ld, n, dt) for ld in loads])


def noise_std(spec, mm, dt: float, loads=None, noise=None, n: int = 8192) -> np.ndarray:
    """Absolute noise std of each sensor, ``level * std(y)`` (eq. 28) with ``std(y)`` the
    STATIONARY response to the load spectra (not that of one short record, which for a
    lightly damped structure started from rest is biased low). ``mm``: a ModalModel whose
    first probes are the sensors."""
    nch = len(spec.sensors)
    kinds = [kind_order(s.kind) for s in spec.sensors]
    fr = np.fft.rfftfreq(n, dt)
    Hy = mm.transfer(fr, kinds + [0] * (mm.Phi_out.shape[0] - nch))[:, :nch]
    loads = force_spectra(spec) if loads is None else loads
    P = _power(loads, n, dt)
    if P.ndim == 2:
        var_y = half_weights(n) @ np.einsum("kcj,kj->kc", np.abs(Hy) ** 2, P)
    else:
        var_y = half_weights(n) @ np.real(np.einsum("kcj,kjl,kcl->kc", Hy, P, np.conj(Hy)))
    if np.any(var_y <= 0):
        bad = [spec.sensors[i].name for i in np.flatnonzero(var_y <= 0)]
        raise ValueError(f"sensor(s) {bad} see nothing of the calibration load: no noise "
                         "level follows from a relative noise")
    sd = _levels(spec, noise) * np.sqrt(var_y)
    if noise is None:  # a sensor's absolute noise_std wins over its relative noise
        given = [getattr(s, "noise_std", None) for s in spec.sensors]
        sd = np.array([g if g is not None else v for g, v in zip(given, sd)], dtype=float)
    return sd


def _on_grid(spec, mm, kinds, nch, loads, noise, dt, n, chain=None):
    """Transfer functions (sensors, outputs), force power per bin and noise variance on the
    one-sided bins of an n-point grid; a ``chain`` (:class:`edge.acquisition.Chain`) filters
    the sensors' transfer by each channel's conversion response ``G_c(f)``. A load model's
    power above half the row rate is folded onto the grid (:mod:`offline.limit.aliases`:
    the outputs then carry the forces' target rows first); the ``[design_load]`` spectra
    lie below it."""
    if folds(loads):
        Hy, Hq, P = folded_grid(mm, kinds, nch, loads, dt, n, chain)
        return Hy, Hq, P, _noise_var(spec, mm, dt, loads, noise, n)
    fr = np.fft.rfftfreq(n, dt)
    H = mm.transfer(fr, kinds)
    if chain is not None and not chain.point:  # a converter or the sensors' own dynamics
        H[:, :nch] *= chain.response(fr, nch)[:, :, None]
    P = _power(loads, n, dt)
    return H[:, :nch], H[:, nch:], P, _noise_var(spec, mm, dt, loads, noise, n)


def _noise_var(spec, mm, dt, loads, noise, n) -> np.ndarray:
    """Each channel's noise variance: a load model's absolute noise, else ``sigma_c = level
    * std(y_c)`` under the load (eq. 28), stationary."""
    if getattr(loads, "noise_std", None) is not None:
        return np.asarray(loads.noise_std) ** 2
    return noise_std(spec, mm, dt, loads, noise, n) ** 2


def with_drift(noise_var: np.ndarray, chain, n: int, dt: float) -> np.ndarray:
    """The channels' noise on the one-sided bins of an n-point grid: the white variance
    ``noise_var`` (nch,) plus, for a channel whose ``chain`` declares a drifting offset (a
    random walk ``b' = w``, ``E[w w] = drift^2 delta``: increments of variance ``q = drift^2
    dt`` per row), its power ``q / (4 sin^2(pi k / n))`` per bin (times n, the convention of
    :func:`offline.limit.wiener.noise_matrix`); at DC, where it has no finite value, the
    half-bin's. (nch,) unchanged without drift, else (n // 2 + 1, nch)."""
    if chain is None or not any(getattr(chain, "drift", ())):
        return noise_var
    q = chain.drift_for(noise_var.size) ** 2 * dt
    k = np.arange(n // 2 + 1, dtype=float)
    k[0] = 0.5
    s2 = 4.0 * np.sin(np.pi * k / n) ** 2
    return noise_var[None, :] + q[None, :] / s2[:, None]


def _drifting(grid: tuple, chain, n: int, dt: float) -> tuple:
    """``(Hy, Hz, P, noise_var)`` of :func:`_on_grid` with the drift added (:func:`with_drift`)."""
    Hy, Hz, P, white = grid
    return Hy, Hz, P, with_drift(white, chain, n, dt)


def _nrmse(fl: dict) -> np.ndarray:
    """(nl, nf + nout) normalised errors of a fixed-lag result."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(np.concatenate([fl["force_err"], fl["output_err"]], axis=1)
                       / np.concatenate([fl["force_var"], fl["output_var"]]))


def _absolute_noise(loads) -> bool:
    """A load model's absolute sensor noise (``build --record``'s learned one) is what the
    limit uses, not the model file's relative levels (:func:`_on_grid`)."""
    return getattr(loads, "noise_std", None) is not None


def _declared_std(spec, noise=None) -> tuple:
    """Per channel: the limit uses its sensor's ``noise_std`` (:func:`noise_std`)."""
    return tuple(noise is None and getattr(s, "noise_std", None) is not None
                 for s in spec.sensors)


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
    memory: int                            # FIR memory [samples] of the upper bounds
    n_grid: int
    noise: np.ndarray                      # (nch,) relative level per channel
    noise_std: np.ndarray                  # (nch,) absolute std [channel unit]
    lag_exact: np.ndarray | None = None    # (nl, nf + nout) True: exact IIR, else FIR bound
    noise_absolute: bool = False           # noise_std is a load model's (not noise x std(y))
    noise_declared: tuple = ()             # per channel: its sensor's noise_std is used
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
                "causal_method": self.causal_method,
                "lag_exact": self._exact().tolist(), **self.info}

    def _exact(self) -> np.ndarray:
        nt = len(self.force_names) + len(self.output_names)
        return (np.zeros((self.delays_s.size, nt), bool) if self.lag_exact is None
                else np.asarray(self.lag_exact, bool))

    @property
    def causal_method(self) -> str:
        """How the delayed limits were computed, in words."""
        ex = self._exact()
        fir = f"best filter of {self.memory} samples of memory, an upper bound"
        if ex.all():
            return f"causal limits exact (spectral factorisation, {self.n_grid}-point grid)"
        if not ex.any():
            return f"causal limits: {fir}"
        return (f"causal limits exact (spectral factorisation, {self.n_grid}-point grid) "
                f"except those marked +: {fir}")

    def _noise_text(self) -> str:
        if self.noise_absolute:
            return ("noise std " + ", ".join(f"{v:.3g}" for v in self.noise_std)
                    + " (the load model's, in the channels' units)")
        given = self.noise_declared or (False,) * len(self.noise)
        return "noise " + ", ".join(f"std {sd:.3g} (noise_std)" if g else f"{100 * v:g} %"
                                    for v, sd, g in zip(self.noise, self.noise_std, given))

    def format(self, achieved: dict | None = None, ratio_delay_s: float | None = None) -> str:
        """Table: one row per force/output, limit at each delay and non-causal; ``achieved``
        ``{name: nrmse}`` adds the estimator's figure and its ratio to the limit at
        ``ratio_delay_s`` (the estimator's delay; :mod:`offline.limit.ratio`), or to the
        non-causal limit without one."""
        heads = [f"{d * 1e3:g} ms" for d in self.delays_s] + ["non-causal"]
        lines = ["accuracy limit: the lowest normalised RMS error (RMS(estimate - truth) / "
                 "std(truth), full band) any estimator can reach, at each delay of the estimate "
                 "(MMSE or Wiener limit)",
                 f"  full model {self.info.get('full_dofs', '?')} DOFs, "
                 f"{self.info.get('n_modes', '?')} modes + residual; {self.causal_method}; "
                 + self._noise_text()]
        head = f"  {'':<14}" + "".join(f"{h:>12}" for h in heads)
        at = None
        if achieved and ratio_delay_s is not None:
            at = np.concatenate(self.at_delay(ratio_delay_s))
        if achieved:
            head += f"{'estimator':>12}{'ratio':>8}"
        lines.append(head)
        ex = self._exact()
        nf = len(self.force_names)
        rows = [(n, self.lag_force_nrmse[:, i], self.force_nrmse[i], ex[:, i])
                for i, n in enumerate(self.force_names)]
        rows += [(n, self.lag_output_nrmse[:, i], self.output_nrmse[i], ex[:, nf + i])
                 for i, n in enumerate(self.output_names)]
        mark = ex.any() and not ex.all()  # a mixed table: "+" on the FIR bounds
        for k, (name, lag, nc, e) in enumerate(rows):
            ln = f"  {name:<14}" + "".join(
                f"{v:>11.4g}" + ("+" if mark and not ok else " ")
                for v, ok in zip(lag, e)) + f"{nc:>12.4g}"
            if achieved and name in achieved:
                a = achieved[name]
                ln += f"{a:>12.4g}{a / (nc if at is None else at[k]):>8.2f}"
            lines.append(ln)
        return "\n".join(lines)


def _grid_points(mm, dt: float, M: int) -> int:
    """DFT points: 16 envelope decay times ``2 / c`` of the slowest elastic mode
    (``c = 2 zeta omega``) and >= 4 M (the FIR's correlations must not wrap), 2^13 .. 2^18."""
    ce = mm.c[mm.n_rigid:]
    tau = 2.0 / float(ce[ce > 0].min()) if np.any(ce > 0) else np.inf
    return 2 ** np.clip(np.ceil(np.log2(max(16 * tau / dt, 4 * M))), 13, 18)


def _kinds(spec) -> list:
    """The derivative order of each sensor, then each output (0 u, 1 v, 2 a)."""
    return [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind) for o in spec.outputs]


def limit_grid(spec, mm, dt: float, loads, *, noise=None, chain=None, memory: int = 1,
               n: int | None = None) -> tuple:
    """``(n, (Hy, Hz, P, noise_var))``: the limit's DFT grid (:func:`_grid_points`, or ``n``)
    and the sensors' and outputs' transfer, the force power and the white noise variance on
    its one-sided bins (:func:`_on_grid`); ``mm``'s probes are the sensors, then the outputs."""
    kinds = _kinds(spec)
    n = int(n or _grid_points(mm, dt, memory))
    return n, _on_grid(spec, mm, kinds, len(spec.sensors), loads, noise, dt, n, chain)


def _with_exact(fir, grid, n: int, lags, on_grid, fold=lambda d: d):
    """The exact IIR limit (:func:`iir_fixed_lag_limit`), kept where it agrees with itself on
    a grid of twice the length within 1 % and does not exceed the FIR (a filter one can
    build): an ideal band edge makes the factor's impulse response decay slowly, which a
    finite grid truncates (then the FIR bound stays, marked in the table). ``grid``: ``(Hy,
    Hz, P, noise_var)`` on ``n`` points; ``on_grid(n2)`` the same on ``n2``. ``(nrmse at the
    lags, exact (bool, same shape))``."""
    Hy, Hz, P, noise_var = grid
    try:
        a = _nrmse(fold(iir_fixed_lag_limit(Hy, P, noise_var, n, lags, Hz=Hz)))
        Hy2, Hz2, P2, nv2 = on_grid(2 * n)
        b = _nrmse(fold(iir_fixed_lag_limit(Hy2, P2, nv2, 2 * n, lags, Hz=Hz2)))
    except ValueError:  # no convergence (a near-singular spectrum): the FIR bound
        return fir, np.zeros(fir.shape, bool)
    exact = (np.abs(a - b) <= 0.01 * b) & (b <= fir * (1 + 1e-3))
    return np.where(exact, np.minimum(b, fir), fir), exact


def model_limit(spec, model=None, *, noise=None, delays=(0.0, 0.005, 0.01, 0.02, 0.1),
                n_modes: int = 80, memory: int | None = None, loads=None, mm=None,
                progress: bool = False, n_grid: int | None = None,
                exact: bool = True, chain=None) -> ModelLimit:
    """MMSE limit of a model file (see module docstring).

    Parameters
    ----------
    spec : ModelSpec or path
    model : FEModel, optional     the constrained full model (built when not given)
    noise : float or (nch,), optional   relative noise levels (default: each sensor's)
    delays : seconds; the causal (fixed-lag) limits are computed at these delays
    n_modes : modes of the full model (the rest enters as residual flexibility)
    memory : samples of measurement of the FIR upper bound (default 2,500 / nch, <= 4,000);
        given, only that bound is computed. Otherwise, when every load is random, the exact
        (IIR, unlimited memory) limit by spectral factorisation
        (:func:`offline.limit.wiener.iir_fixed_lag_limit`) replaces it where it agrees with
        itself on a grid of half the length within 1 % and lies below it.
    loads : list of ForceSpectrum, or a load model, optional   (default
        :func:`force_spectra`; a :class:`offline.load.LoadModel` brings its own spectra,
        correlation and absolute sensor noise)
    mm : ModalModel, optional   of (forces -> sensors + outputs), reused from the build
    n_grid : int, optional   DFT grid (default: 16 envelope decay times of the slowest mode
        and >= 4 memory, 2^13 .. 2^18 points)
    exact : bool   False: the FIR upper bounds only (seconds instead of tens of seconds on
        a lightly damped structure; what the build reports)
    chain : edge.acquisition.Chain, optional   the measurement chain: each channel is the
        conversion of the response (:func:`_on_grid`); default point samples
    """
    if not hasattr(spec, "sensors"):
        spec = load_model_file(spec)
    if not spec.sensors or not spec.forces:
        raise ValueError(f"{spec.where('[[sensors]]/[[forces]]')}: the limit needs at least "
                         "one sensor and one force")
    if model is None:
        model = build_fe_model(spec, progress=progress)
    dt = 1.0 / (spec.estimator.rate if spec.estimator else 1000.0)
    cd = [sensor_probe(model, s, s.where or s.name) for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.where or f.name)[0] for f in spec.forces]
    od = [output_probe(model, o) for o in spec.outputs]
    kinds = _kinds(spec)
    nch = len(cd)
    lags = np.unique(np.round(np.asarray(delays, dtype=float) / dt).astype(int))
    loads = force_spectra(spec) if loads is None else loads
    if mm is None:
        mm = modal_model(model, fd, cd + od, n_modes=n_modes)
    is_model = hasattr(loads, "power_per_bin")  # a load model: smooth spectra, no lines
    iir = exact and memory is None and (is_model or all(ld.type in ("random", "none")
                                                        for ld in loads))
    M = int(memory or min(4000, max(2500 // nch, 1)))
    M = max(M, int(lags.max()) + 1)
    n, (Hy, Hz, P, white) = limit_grid(spec, mm, dt, loads, noise=noise, chain=chain,
                                       memory=M, n=n_grid)
    noise_var = with_drift(white, chain, n, dt)
    if not np.any(P > 0):
        raise ValueError(f"{spec.where('[design_load]')}: no force is loaded")
    nf = len(spec.forces)
    fold = target_rows(loads, nf)  # a folded grid: the forces are the first target rows
    lim = fold(wiener_limit(Hy, P, noise_var, n, Hz=Hz))
    fir = _nrmse(fold(fixed_lag_limit(Hy, P, noise_var, n, lags, M, Hz=Hz)))
    lag_nrmse, exact = fir, np.zeros(fir.shape, bool)
    if iir and n >= 4 * (lags.max() + 1):
        lag_nrmse, exact = _with_exact(fir, (Hy, Hz, P, noise_var), n, lags, lambda n2: _drifting(
            _on_grid(spec, mm, kinds, nch, loads, noise, dt, n2, chain), chain, n2, dt), fold)
    lf, lo = lag_nrmse[:, :nf], lag_nrmse[:, nf:]
    return ModelLimit(force_names=[f.name for f in spec.forces],
                      output_names=[o.name for o in spec.outputs],
                      force_nrmse=lim.force_nrmse, output_nrmse=lim.output_nrmse,
                      delays_s=lags * dt, lag_force_nrmse=lf, lag_output_nrmse=lo, dt=dt,
                      memory=M, n_grid=n, noise=_levels(spec, noise), noise_std=np.sqrt(white),
                      lag_exact=exact, noise_absolute=_absolute_noise(loads),
                      noise_declared=_declared_std(spec, noise),
                      info={"full_dofs": int(model.n_dofs), "n_modes": int(mm.lam.size),
                            # the stationary std of each force and output under the load:
                            # the normaliser of every limit above (offline/limit/ratio.py)
                            "force_std": np.sqrt(lim.force_var).tolist(),
                            "output_std": np.sqrt(lim.output_var).tolist(),
                            "n_rigid": int(mm.n_rigid),
                            "loads": (loads.as_meta() if is_model
                                      else [ld.__dict__ for ld in loads])})
