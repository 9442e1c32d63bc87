"""Simulated test rigs: load profiles, full or reduced model responses, noisy sensor records.

The truth comes from a Newmark-beta run (average acceleration) on a fine time step
(``oversample`` sub-steps per sample) of the *full* sparse model, or of the reduced model when
speed matters (calibration, training data). Sensors are sampled at the bundle rate (``chain
= "ideal"``) or converted by the ADS1256 over their windows (``"ads1256"``,
:mod:`offline.chain`) and get Gaussian noise per paper 004 eq. 28: ``y_noisy = y + sigma
N``, ``sigma = level * std(y)``, or the sensor's absolute ``noise_std`` (by default each
channel as its ``[[sensors]]`` entry declares, :func:`channel_noise`). The integrators themselves (sparse Newmark, exact modal
superposition, dense Newmark) are in :mod:`offline.integrators`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.csvio import read_table, write_table
from edge.kinds import kind_order
from offline.chain import (
    MIN_STEPS_PER_ROW,
    SensorDynamics,
    conversions,
    offset_walks,
    plan_chain,
    plan_daq,
    refine_grid,
    sensor_outputs,
)
from offline.metrics import add_noise as _add
from offline.model import build_fe_model, load_model_file, output_probe, resolve_dofs, sensor_probe
from offline.integrators import simulate_dense, simulate_modal, simulate_sparse
from offline.reduced import reduce_model

# ------------------------------------------------------------------------ load profiles
LOAD_TYPES = ("sine", "chirp", "random", "pulse", "csv")


def load_profile(kind: str, t: np.ndarray, *, freq=None, amplitude=1.0, band=None, rms=None,
                 seed=0, ramp=0.0, csv_path=None, column=None, width=None) -> np.ndarray:
    """A force history f(t) [N] on the time grid ``t`` [s].

    Parameters
    ----------
    kind : {"sine", "chirp", "random", "pulse", "csv"}
        ``sine``: amplitude sin(2 pi freq t); ``chirp``: linear sweep over ``band`` with
        ``amplitude``; ``random``: Gaussian noise band-limited to ``band`` [Hz] (ideal FFT
        filter), scaled to ``rms``; ``pulse``: one half-sine of ``amplitude`` and ``width``
        seconds (default 0.002 s) at the start; ``csv``: column ``column`` of a CSV with a
        ``time`` column, linearly interpolated.
    width : float
        Pulse width [s] (``pulse`` only). ``freq`` is accepted as the width too, for older
        callers; ``width`` wins.
    ramp : float
        Time constant [s] of a ``1 - exp(-t / ramp)`` onset (paper eq. 27 uses 0.05 s); 0: none.
    """
    t = np.asarray(t, dtype=float)
    if kind == "sine":
        if freq is None or freq <= 0:
            raise ValueError("sine load needs freq > 0 [Hz]")
        f = amplitude * np.sin(2 * np.pi * freq * t)
    elif kind == "chirp":
        if band is None:
            raise ValueError("chirp load needs band = [f0, f1] [Hz]")
        f0, f1 = band
        T = max(t[-1] - t[0], 1e-12)
        # instantaneous frequency f0 + (f1 - f0) t / T
        f = amplitude * np.sin(2 * np.pi * (f0 * (t - t[0]) + 0.5 * (f1 - f0) * (t - t[0]) ** 2 / T))
    elif kind == "random":
        if band is None or rms is None:
            raise ValueError("random load needs band = [f0, f1] [Hz] and rms [N]")
        rng = np.random.default_rng(seed)
        n = t.size
        dt = t[1] - t[0]
        spec = np.fft.rfft(rng.standard_normal(n))
        fr = np.fft.rfftfreq(n, dt)
        spec[(fr < band[0]) | (fr > band[1])] = 0.0
        if not np.any(spec[1:]):  # a reversed band, or none of the record's frequencies
            raise ValueError(f"random load band {list(band)} Hz holds no frequency of the "
                             f"record (0 < f0 < f1, f1 - f0 > 1/duration = {1 / (n * dt):.3g} Hz)")
        f = np.fft.irfft(spec, n)
        f *= rms / max(np.std(f), 1e-300)
    elif kind == "pulse":
        width = width if width is not None else (freq if freq is not None else 0.002)
        if not width > 0:
            raise ValueError(f"pulse load needs width > 0 [s], got {width!r}")
        f = np.where(t - t[0] < width, amplitude * np.sin(np.pi * (t - t[0]) / width), 0.0)
    elif kind == "csv":
        tt, data, names = read_csv(csv_path)
        col = names.index(column) if column is not None else 0
        f = np.interp(t, tt, data[:, col], left=0.0, right=0.0)
    else:
        raise ValueError(f"unknown load type {kind!r}; expected one of {', '.join(LOAD_TYPES)}")
    if ramp > 0:
        f = f * (1.0 - np.exp(-(t - t[0]) / ramp))
    return f


# ---------------------------------------------------------------------------- results
@dataclass
class SimResult:
    """Sampled truth and noisy measurements of one simulated run.

    Attributes
    ----------
    t : (ns,) sample times [s]; Y : (ns, nch) noisy channels; Y_clean : (ns, nch) noise-free
    point values at ``t``; F : (ns, nf) applied forces [N]; Z : (ns, nout) true virtual
    outputs; names of each; Y_conv : (ns, nch) the noise-free conversions ``Y`` was made of
    (None for point samples: ``Y_clean``).
    """

    t: np.ndarray
    Y: np.ndarray
    Y_clean: np.ndarray
    F: np.ndarray
    Z: np.ndarray
    channel_names: list
    force_names: list
    output_names: list
    info: dict = field(default_factory=dict)
    Y_conv: np.ndarray | None = None

    def snr_db(self) -> np.ndarray:
        """SNR per channel [dB] (paper eq. 29: signal power over noise power)."""
        noise = self.Y - (self.Y_clean if self.Y_conv is None else self.Y_conv)
        return 10 * np.log10(np.sum(self.Y ** 2, axis=0) / np.maximum(np.sum(noise ** 2, axis=0),
                                                                    1e-300))

    def noise_summary(self, given: str = "given") -> str:
        """``noise: d110 2 % (model file), a170 0.03 m/s^2 (noise_std)``: what each channel
        got (:func:`channel_noise`); ``given`` names an explicit level's source."""
        i = self.info
        words = {"default": "default: the model file declares none", "given": given}
        parts = [f"{n} {lv * 100:g} %" if np.isfinite(lv) else f"{n} {sd:g} {u}" for n, u, lv, sd
                 in zip(self.channel_names, i["units"], i["noise_levels"], i["noise_std"])]
        return "noise: " + ", ".join(f"{p} ({words.get(s, s)})"
                                     for p, s in zip(parts, i["noise_from"]))

    def write(self, measurement_csv, truth_csv) -> None:
        """Measurement: ``time,<channels>``; truth: ``time,<forces>,<outputs>,<channels>``."""
        write_csv(measurement_csv, self.t, self.Y, self.channel_names)
        write_csv(truth_csv, self.t, np.hstack([self.F, self.Z, self.Y_clean]),
                  self.force_names + self.output_names + self.channel_names)


def add_noise(Y: np.ndarray, level, rng, std=None) -> np.ndarray:
    """Paper eq. 28 per column, with a level per column (see :func:`offline.metrics.add_noise`);
    a column whose absolute ``std`` (nch,) is finite gets that std instead (same draws)."""
    level = np.broadcast_to(np.asarray(level, dtype=float), (Y.shape[1],))
    std = np.full(Y.shape[1], np.nan) if std is None else np.asarray(std, dtype=float)
    cols = [Y[:, j] + std[j] * rng.standard_normal(Y.shape[0]) if np.isfinite(std[j])
            else _add(Y[:, j], level[j], rng) for j in range(Y.shape[1])]
    return np.column_stack(cols) if Y.shape[1] else Y.copy()


#: Relative noise of a sensor that declares neither ``noise`` (> 0) nor ``noise_std``.
DEFAULT_NOISE = 0.01


def channel_noise(sensors, noise=None):
    """The noise each channel of ``simulate`` gets: ``(level, std, source)`` per channel, a
    relative level (eq. 28; nan where absolute), an absolute std [channel unit] (nan where
    relative) and where it comes from. ``noise`` None: each sensor's declaration, its
    ``noise_std`` (absolute, ``"noise_std"``) where given, else its ``noise`` (relative,
    ``"model file"``), else (``noise = 0``, the schema's default) :data:`DEFAULT_NOISE`
    (``"default"``); a number or (nch,) array: that relative level on every channel
    (``"given"``)."""
    n = len(sensors)
    if noise is not None:
        lv = np.broadcast_to(np.asarray(noise, dtype=float), (n,)).copy()
        if not np.all(np.isfinite(lv) & (lv >= 0)):
            raise ValueError(f"noise (--noise): a relative level must be a finite number "
                             f">= 0, got {noise!r}")
        return lv, np.full(n, np.nan), ["given"] * n
    lv, sd, src = np.full(n, np.nan), np.full(n, np.nan), []
    for j, s in enumerate(sensors):
        if getattr(s, "noise_std", None) is not None:
            sd[j] = float(s.noise_std)
            src.append("noise_std")
        else:
            lv[j] = float(s.noise) if s.noise else DEFAULT_NOISE
            src.append("model file" if s.noise else "default")
    return lv, sd, src




# ------------------------------------------------------------------------------- CSV
def write_csv(path, t, data, names) -> None:
    """``time,<names>`` CSV (:func:`edge.csvio.write_table`)."""
    write_table(path, t, data, names)


def read_csv(path):
    """Read a ``time,<names>`` CSV; returns (t (n,), data (n, m), names). Clear errors."""
    return read_table(path)


# ------------------------------------------------------------------- model-file runs
def force_histories(spec, active, kind: str, t: np.ndarray, seed: int, load: dict) -> np.ndarray:
    """The history of every force of a model file under one load profile, ``(nt, nf)``.

    As in the build's calibration runs (:mod:`offline.calibration_runs`), force ``i`` gets its
    own realisation (seed ``seed + 1000 i``) of the profile times its ``scale``: two forces
    identified at once are independent and have the sizes the estimator was designed for.
    A ``csv`` profile is a measured history in N: a column named after the force drives it
    (else the file's first column), unscaled.

    Parameters
    ----------
    spec : ModelSpec
    active : list of int        indices of the loaded forces (the others stay zero)
    kind : str                  load type of :func:`load_profile`
    t : (nt,) time grid [s]; seed : int; load : keyword arguments of :func:`load_profile`
    """
    F = np.zeros((t.size, len(spec.forces)))
    names = None
    if kind == "csv" and load.get("column") is None:
        names = read_csv(load["csv_path"])[2]
    for i in active:
        f = spec.forces[i]
        if kind == "csv":
            col = load.get("column") or (f.name if f.name in names else None)
            F[:, i] = load_profile(kind, t, seed=seed, **{**load, "column": col})
        else:
            sc = float(getattr(f, "scale", 1.0))
            F[:, i] = sc * load_profile(kind, t, seed=seed + 1000 * i, **load)
    return F


def model_chain(spec, chain: str, drate, mode, rate: float, oversample: int):
    """The resolved :class:`offline.chain.Chain` of ``--chain/--drate/--mode``:
    ``chain = "model"`` converts as the model file's ``[acquisition]`` declares (or its
    default, :meth:`offline.model.ModelSpec.chain`; a ``daq`` by its FIR,
    :func:`offline.chain.plan_daq`), explicit ``drate``/``mode`` taking precedence; other
    chains by :func:`offline.chain.plan_chain`."""
    n = len(spec.sensors)
    if chain == "model":
        c = spec.chain()
        if c.converter == "daq":
            if drate is not None or mode is not None:
                raise ValueError("drate/mode (--drate/--mode) belong to --chain ads1256; the "
                                 "model file's daq converts at its [acquisition] drate and "
                                 "mode")
            return plan_daq(c, n, oversample)
        chain = c.converter
        if chain == "ads1256":
            drate = c.drate if drate is None else drate
            mode = c.mode if mode is None else mode
    return plan_chain(chain, rate, n, drate, mode, oversample)


def simulate_model(model_path, load: dict, duration: float, noise=None, oversample: int = 10,
                   reduced: bool = False, seed: int = 0, rate: float | None = None,
                   progress: bool = True, build_result=None, engine: str = "modal",
                   n_modes: int = 80, warmup: float = 0.0, chain: str = "model",
                   drate: float | None = None, mode: str | None = None) -> SimResult:
    """Simulate the rig described by a model file under a load profile.

    Parameters
    ----------
    model_path : path of the model TOML (sensors, forces, outputs, estimator rate).
    load : dict
        Keyword arguments of :func:`load_profile` plus ``type`` (sine, chirp, random, pulse,
        csv) and optionally ``force`` (the name of the force it drives; default all). Each
        force gets its own realisation times its ``scale`` (:func:`force_histories`).
    duration : float        record length [s]
    warmup : float
        Seconds simulated before the record starts and then dropped (default 0: the record
        starts at rest, with the load's first value applied at once, a step). With a warm-up
        the record is a piece of the stationary response, like the build's calibration runs
        scored after their ``[design_load] warmup``; the noise level refers to the record.
        A ``csv`` load's time 0 is the warm-up's start (record time 0 = CSV time ``warmup``,
        to a sample; 0 N outside the CSV's times). Record times: ``k / rate``.
    noise : None (default): each sensor's declared noise, its ``noise_std`` (absolute) or
        else its ``noise`` (relative), :data:`DEFAULT_NOISE` where it declares neither
        (:func:`channel_noise`); a float or (nch,): the relative noise level per channel
        (eq. 28; 0.01 = 1 %). Added to the measurements (the conversions with a chain);
        ``info["noise_levels"/"noise_std"/"noise_from"]`` say what each channel got.
    oversample : int        fine sub-steps per sample (integrator step and load grid, >= 1)
    reduced : bool          simulate the reduced model (:func:`offline.reduced.reduce_model`,
                            the bundle's coordinates) instead of the full one
    engine : {"modal", "newmark"}
        Full-model integrator: exact modal superposition of ``n_modes`` modes with static
        correction (:func:`simulate_modal`, default: fast, no period error), or sparse
        Newmark on every DOF (:func:`simulate_sparse`).
    chain, drate, mode : the measurement chain (:mod:`offline.chain`): ``"ideal"`` point
        samples at the row times, or ``"ads1256"`` conversions at ``drate`` SPS in
        ``"continuous"``/``"cycle"`` mode (defaults: :func:`offline.chain.plan_chain`);
        ``"model"`` (default) as the model file declares, a ``daq`` included (its FIR,
        :func:`offline.chain.plan_daq`); each
        channel over its window at its own instant, integrated on a grid refined to at least
        32 steps per row. The truth (``F``, ``Z``, ``Y_clean``) stays point values. Each
        sensor's own dynamics (``[[sensors]]`` highpass_hz, average_s, drift) act on the
        fine grid before the converter (:func:`offline.chain.sensor_outputs`, a seeded
        random-walk offset :func:`offline.chain.offset_walks` added after the noise).
    """
    if isinstance(oversample, bool) or not isinstance(oversample, (int, np.integer)) \
            or oversample < 1:
        raise ValueError(f"oversample must be an integer >= 1, got {oversample!r}")
    load = dict(load)
    kind = load.pop("type", "random")
    target = load.pop("force", None)
    rng = np.random.default_rng(seed)
    spec = build_result.spec if build_result is not None else load_model_file(model_path)
    rate_hz = float(rate or (spec.estimator.rate if spec.estimator else 1000.0))
    dt = 1.0 / rate_hz
    if not (np.isfinite(warmup) and warmup >= 0):
        raise ValueError(f"warmup must be a number of seconds >= 0, got {warmup!r}")
    nw = int(round(warmup / dt))
    ns = int(round(duration / dt)) + 1 + nw
    names_f = [f.name for f in spec.forces]
    kinds = [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind)
                                                           for o in spec.outputs]
    active = [i for i, n in enumerate(names_f) if target in (None, n)]
    if target is not None and not active:
        raise ValueError(f"load force {target!r} is not one of the model's forces {names_f}")
    if engine not in ("modal", "newmark"):
        raise ValueError(f"engine must be 'modal' or 'newmark', got {engine!r}")
    ch = model_chain(spec, chain, drate, mode, 1.0 / dt, oversample)
    # the load on a grid `oversample` times finer than the samples (a 2 ms pulse sampled
    # only at 1 kHz loses ~20 % of its impulse)
    tf = np.arange((ns - 1) * oversample + 1) * (dt / oversample)
    F_fine = force_histories(spec, active, kind, tf, seed, load)
    run = dict(spec=spec, kinds=kinds, engine=engine, n_modes=n_modes, progress=progress,
               build_result=build_result)
    return _record(spec, ch, reduced, F_fine, rate_hz, oversample, ns, nw, run, seed, noise,
                   rng, kind)


def _record(spec, ch, reduced: bool, F_fine, rate_hz: float, oversample: int, ns: int, nw: int,
            run: dict, seed, noise, rng, kind: str) -> SimResult:
    """The run of :func:`simulate_model` on the fine load ``F_fine``: point samples, or through
    the measurement chain ``ch`` and the sensors' dynamics; the warm-up's ``nw`` rows dropped,
    the noise added (paper eq. 28) and the drifting offsets after it."""
    dt = 1.0 / rate_hz
    names_c = [s.name for s in spec.sensors]
    nc = len(names_c)
    dyn = SensorDynamics.of(spec.sensors)
    Bm = 0.0
    if ch.kind == "ideal" and not dyn.any:
        out, info = _run(reduced, F_fine, dt / oversample, oversample, **run)
        Ym = out[:, :nc]
    else:
        out, Ym, Bm, info = _run_chain(ch, reduced, F_fine, dt, oversample, ns, nc, run,
                                       dyn, seed)
    F = F_fine[::oversample]
    info["dt"] = dt
    Yc, Ym, Z, F = out[nw:, :nc], Ym[nw:], out[nw:, nc:], F[nw:]
    t = np.arange(ns - nw) / rate_hz  # k / rate, not sums of fine steps (0.00099999...)
    Bm = Bm[nw:] if np.ndim(Bm) else Bm
    lv, sd, src = channel_noise(spec.sensors, noise)
    Y = add_noise(Ym, lv, rng, sd) + Bm
    Ym = Ym + Bm
    info.update({"load": kind, "noise": noise, "seed": seed, "warmup": nw * dt,
                 "noise_levels": lv.tolist(), "noise_std": sd.tolist(), "noise_from": src,
                 "units": [s.unit for s in spec.sensors]})
    info.setdefault("chain", "ideal")
    return SimResult(t=t, Y=Y, Y_clean=Yc, F=F, Z=Z, channel_names=names_c,
                     force_names=[f.name for f in spec.forces],
                     output_names=[o.name for o in spec.outputs], info=info,
                     Y_conv=None if ch.kind == "ideal" and not dyn.any else Ym)


def _run_chain(ch, reduced: bool, F_fine, dt: float, oversample: int, ns: int, nc: int,
               run: dict, dyn, seed):
    """The ads1256 chain or the sensors' dynamics: :func:`_run` on the grid refined to 32
    steps per row at least (plus the steps the last row's windows need), the first ``nc``
    columns through the sensors (:func:`offline.chain.sensor_outputs`) and converted
    (:func:`offline.chain.conversions`; ideal: the rows' nodes). ``(point rows (ns, ...),
    conversions (ns, nc), converted offsets (ns, nc), info)``."""
    refine = max(ch.refine, -(-MIN_STEPS_PER_ROW // oversample)) if dyn.any else ch.refine
    sub = oversample * refine
    Fr = refine_grid(F_fine, refine, ch.pad_steps(dt / sub))
    out, info = _run(reduced, Fr, dt / sub, 1, **run)
    y = sensor_outputs(out[:, :nc], dt / sub, dyn)
    b = offset_walks(y.shape[0], dt / sub, dyn.drift, seed)
    if ch.kind == "ideal":
        Ym, Bm = y[:(ns - 1) * sub + 1:sub], b[:(ns - 1) * sub + 1:sub]
    else:
        Ym = conversions(y, dt / sub, sub, ns, ch.drate, ch.offsets, taps=ch.taps)
        Bm = conversions(b, dt / sub, sub, ns, ch.drate, ch.offsets, taps=ch.taps)
        info.update({"chain": ch.kind, "drate": ch.drate, "mode": ch.mode,
                     "offsets_s": ch.offsets.tolist()})
    if dyn.any:
        info["sensor_dynamics"] = {"highpass_hz": dyn.highpass_hz.tolist(),
                                   "average_s": dyn.average_s.tolist(),
                                   "drift": dyn.drift.tolist(), "dt_fine": dt / sub}
    return out[:(ns - 1) * sub + 1:sub], Ym, Bm, info


def _run(reduced: bool, F_fine, dt_f: float, decim: int, *, spec, kinds, engine, n_modes,
         progress, build_result):
    """Channels then outputs at every ``decim``-th step of the fine grid ``F_fine`` (one row
    per step of ``dt_f``): the reduced model (Newmark) or the full one. ``(out, info)``."""
    if reduced:
        # the reduced model only (offline.reduced): no calibration, no estimator design
        rm = build_result.reduced if build_result is not None else \
            reduce_model(spec, progress=progress)
        rows = np.vstack([rm.channel_rows(), rm.output_rows()])
        out = simulate_dense(rm.reduction.M, rm.C, rm.reduction.K,
                             [rm.position(d) for d in rm.force_dofs], F_fine, dt_f, rows,
                             kinds)[::decim]
        return out, {"model": "reduced", "dt_fine": dt_f}
    model = build_result.model if build_result is not None else \
        build_fe_model(spec, progress=progress)
    dofs = [sensor_probe(model, x, x.name) for x in spec.sensors]
    dofs += [output_probe(model, x, x.name) for x in spec.outputs]
    fd = np.array([resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces])
    probes = list(zip(dofs, kinds))
    if engine == "modal":
        out = simulate_modal(model, fd, F_fine, dt_f, decim, probes, n_modes=n_modes,
                             progress=progress)
    else:
        out = simulate_sparse(model.M, model.damping_matrix(), model.K, fd, F_fine, dt_f,
                              decim, probes, progress=progress)
    return out, {"model": "full", "engine": engine, "dt_fine": dt_f,
                 "full_dofs": int(model.n_dofs)}
