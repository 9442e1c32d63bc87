"""Honest calibration runs: the FULL FE model, integrated exactly, with the sensors' noise.

The calibration runs simulate the full FE model (not the bundle's reduced matrices) with an
integrator that is not the estimator's: exact modal superposition of the full model's modes
(first-order hold on ``oversample`` fine sub-steps per sample) plus the static response of the
omitted modes (:class:`offline.limit.transfer.ModalModel`, the engine of the demo's truth).
Each force gets its own load realisation (seed ``seed + 1000 i``) times its ``scale``; each
channel Gaussian noise ``level * std`` (paper eq. 28). Several seeds make the choice robust
and give its spread. Each run is ``warmup + duration`` long and scored over the last
``duration`` only: structure and estimator start at rest, and the error of the first second
is not the steady one (measured on a small beam: 0.42 over the first 0.5 s, 0.56 in steady
state). The choice made on them: :mod:`offline.estimator_choice`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.kinds import kind_order
from edge.estimator.expm import foh_matrices
from offline._deps import need
from offline._deps import progress as _progress
from offline.limit.model import NOISE_FLOOR, noise_std
from offline.limit.modal_damping import run_coupled
from offline.limit.transfer import modal_model
from offline.limit.truth_std import truth_std
from offline.chain import (MIN_STEPS_PER_ROW, SensorDynamics, conversions, refine_grid,
                           sensor_outputs)
from offline.load.declared import declared_load_model
from offline.simulate import load_profile


@dataclass
class CalRun:
    """One calibration run sampled at the bundle rate: F (ns, nf), Y, Y_clean (ns, nch),
    Z (ns, nout) true outputs, noise std (nch,); errors are scored from sample ``start``
    on (the warm-up before it lets structure and estimator reach their steady state) over
    ``scale`` (nf + nout,), the truth's stationary std under the run's load
    (:mod:`offline.limit.truth_std`; None: each run's own std)."""

    t: np.ndarray
    F: np.ndarray
    Y: np.ndarray
    Y_clean: np.ndarray
    Z: np.ndarray
    sigma: np.ndarray
    seed: int
    start: int = 0
    scale: np.ndarray | None = None


def run_modal(mm, F_fine: np.ndarray, dt_fine: float, decim: int, kinds) -> np.ndarray:
    """Response of a :class:`~offline.limit.transfer.ModalModel` to forces on a fine grid.

    Each mode ``q'' + c q' + lam q = phi_in^T f`` is integrated exactly for a force linear
    between fine steps (:func:`edge.estimator.expm.foh_matrices`; all modes at once where
    the damping couples them, :func:`offline.limit.modal_damping.run_coupled`);
    displacements add the residual flexibility ``R f``. Returns the probes
    (nt // decim + 1, nprobe) at every ``decim``-th fine step; ``kinds`` (nprobe,) 0 u, 1 v,
    2 a.
    """
    if mm.Ct is not None:  # damping coupling the modes (offline/limit/modal_damping.py)
        Q, Qd, Qdd = run_coupled(mm.lam, mm.Ct, F_fine @ mm.Phi_in, dt_fine, decim)
        return _probes(mm, Q, Qd, Qdd, F_fine[::decim], kinds)
    m = mm.lam.size
    A = np.zeros((m, 2, 2))
    G0 = np.zeros((m, 2))
    G1 = np.zeros((m, 2))
    for i in range(m):
        Ac = np.array([[0.0, 1.0], [-mm.lam[i], -mm.c[i]]])
        Ai, g0, g1 = foh_matrices(Ac, np.array([[0.0], [1.0]]), dt_fine)
        A[i], G0[i], G1[i] = Ai, g0[:, 0], g1[:, 0]

    signal = need("scipy.signal")
    kinds = np.asarray(kinds, dtype=int)
    nt = F_fine.shape[0]
    Pf = F_fine @ mm.Phi_in                     # modal load on the fine grid (nt, m)
    Pm = Pf[::decim]                            # at the samples (ns, m)
    Q = np.empty_like(Pm)
    Qd = np.empty_like(Pm)
    imp = np.zeros(nt)
    imp[0] = 1.0
    for i in range(m):
        # [q; qd]_{k+1} = A [q; qd]_k + G0 p_k + G1 p_{k+1} (exact for p linear in a step)
        # as a transfer function: x(z) = (z I - A)^-1 (G0 + z G1) p(z), run by lfilter;
        # den = z^2 - tr(A) z + det(A), num = adj(z I - A) (G0 + z G1). That filter starts
        # from x_0 = G1 p_0; the run starts from rest, x_0 = 0: subtract the free response
        # e_k = A^k G1 p_0, e(z) = z (z I - A)^-1 e_0
        a_ = A[i]
        den = np.array([1.0, -np.trace(a_), np.linalg.det(a_)])
        e0 = G1[i] * Pf[0, i]
        for row, out in ((0, Q), (1, Qd)):
            o = 1 - row
            # adj(zI - A) row `row`: [z - A_oo, A_ro] permuted to the state order
            adj_r = np.zeros((2, 2))            # coefficients [z^1, z^0] per input component
            adj_r[row] = [1.0, -a_[o, o]]
            adj_r[o] = [0.0, a_[row, o]]
            g1, g0 = G1[i], G0[i]
            # num(z) = sum_j adj_r[j](z) (g0_j + z g1_j);  free: sum_j e0_j z adj_r[j](z)
            num = np.zeros(3)
            free = np.zeros(3)
            for j in range(2):
                num += np.convolve(adj_r[j], [g1[j], g0[j]])
                free += e0[j] * np.append(adj_r[j], 0.0)
            out[:, i] = (signal.lfilter(num, den, Pf[:, i])
                         - signal.lfilter(free, den, imp))[::decim]
    Qdd = Pm - mm.c * Qd - mm.lam * Q            # modal equilibrium
    return _probes(mm, Q, Qd, Qdd, F_fine[::decim], kinds)


def _probes(mm, Q, Qd, Qdd, Fs, kinds) -> np.ndarray:
    """The probes (ns, nprobe) from the modal displacements, velocities and accelerations
    at the samples; displacements add the residual flexibility ``R f``."""
    out = np.empty((Q.shape[0], len(kinds)))
    for j, kd in enumerate(kinds):
        row = mm.Phi_out[j]
        if kd == 0:
            out[:, j] = Q @ row + Fs @ mm.R[j]
        elif kd == 1:
            out[:, j] = Qd @ row
        else:
            out[:, j] = Qdd @ row
    return out


def calibration_runs(spec, model, chan_dofs, force_dofs, out_dofs, dt: float, *,
                     seeds=None, oversample: int = 10, n_modes: int = 80, mm=None,
                     noise=None, progress: bool = False, load_model=None,
                     chain=None) -> list[CalRun]:
    """Honest calibration runs of a model file (module docstring), one per seed.

    The noise std of each channel is ``level * std(y)`` with the STATIONARY std of the
    response (:func:`offline.limit.model.noise_std`; ``noise`` overrides the levels), the
    same in every run, as a sensor's noise is.

    ``load_model``: an :class:`offline.load.LoadModel` (e.g. learned from records) instead of
    the ``[design_load]`` loads: the forces are drawn jointly from its spectra (seed ``seed``)
    and the noise is its absolute ``noise_std`` where it has one.

    ``chain``: an :class:`edge.acquisition.Chain`: each sensor's high-pass and moving average
    (:func:`offline.chain.sensor_outputs`), then a converter other than ideal converts the
    channels as it does (:func:`convert`), on a grid of at least
    :data:`offline.chain.MIN_STEPS_PER_ROW` steps per row where either acts; the outputs
    stay point values (the truth). A sensor's drifting offset is not
    added (the build's ratio to the limit adds it: :func:`offline.chain.with_walks`): with
    the walk in three 2 s runs the stated std's model-error factor
    (offline/smoother/std_scale.py) widened a right std (tests/test_sensor_dynamics.py: d05's
    coverage on a 20 s record 74 -> 79 %, where 61-75 % is asked).
    """
    cal = spec.calibration
    warmup = float(getattr(cal, "warmup", 1.0)) if cal else 1.0
    duration = (cal.duration if cal else 2.0) + warmup
    seed0 = cal.seed if cal else 0
    n_seeds = cal.seeds if cal else 3
    seeds = list(range(seed0, seed0 + n_seeds)) if seeds is None else list(seeds)
    kinds = [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind)
                                                          for o in spec.outputs]
    if mm is None:
        mm = modal_model(model, force_dofs, list(chan_dofs) + list(out_dofs), n_modes=n_modes)
    ns = int(round(duration / dt)) + 1
    dtf = dt / oversample
    nt = (ns - 1) * oversample + 1
    tf = np.arange(nt) * dtf
    if load_model is not None and load_model.noise_std is not None:
        sigma = np.asarray(load_model.noise_std, dtype=float)
    else:
        sigma = noise_std(spec, mm, dt, noise=noise, loads=load_model)
    scale = truth_std(spec, mm, dt, loads=load_model)  # the errors' normaliser
    nch = len(spec.sensors)
    point = chain is None or chain.point
    runs = []
    for seed in _progress(seeds, desc="calibration runs (full model)", enable=progress):
        if load_model is not None:
            Ff = load_model.sample(tf, seed)
        else:
            Ff = _declared_forces(spec, cal, tf, dt, seed)
        if point:
            out = run_modal(mm, Ff, dtf, oversample, kinds)
            Yc, Z = out[:, :nch], out[:, nch:]
        else:  # the sensors and the converter's taps on a finer grid (linear between steps)
            ref = max(1, -(-MIN_STEPS_PER_ROW // oversample))
            sub = oversample * ref
            out = run_modal(mm, refine_grid(Ff, ref), dtf / ref, 1, kinds)
            Yc = sensor_rows(out[:, :nch], dt / sub, sub, ns, chain)
            Z = out[::sub, nch:]
        rng = np.random.default_rng(seed)
        Y = Yc + sigma * rng.standard_normal(Yc.shape)
        runs.append(CalRun(t=tf[::oversample], F=Ff[::oversample], Y=Y, Y_clean=Yc, Z=Z,
                           sigma=sigma, seed=int(seed), start=int(round(warmup / dt)),
                           scale=scale))
    return runs


def noise_warning(spec, load_model=None) -> str | None:
    """The sensors that declare neither ``noise`` nor ``noise_std`` (0 to the schema): the
    runs, the limit and the design then take the floor :data:`offline.limit.model.
    NOISE_FLOOR`, so the stated std assumes near-perfect sensors; None when every sensor
    declares one or ``load_model`` carries a learned absolute noise (``build --record``)."""
    if load_model is not None and getattr(load_model, "noise_std", None) is not None:
        return None
    names = [s.name for s in spec.sensors
             if not s.noise and getattr(s, "noise_std", None) is None]
    if not names:
        return None
    return (f"{', '.join(names)}: no noise declared ([[sensors]] noise or noise_std): the "
            f"estimator is designed for a noise of {NOISE_FLOOR:g} of the signal's std (the "
            "floor), so its stated std assumes near-perfect sensors; declare each sensor's "
            "noise (its data sheet's), or learn it from a record (build --record)")


def _sensor_dynamics(chain, nch: int):
    """The sensors' high-pass and moving average of ``chain`` (their drift left out, see
    :func:`calibration_runs`), or None when no sensor has either."""
    if chain is None:
        return None
    hp, avg = chain.highpass_for(nch), chain.average_for(nch)
    if not (np.any(hp) or np.any(avg)):
        return None
    return SensorDynamics(highpass_hz=hp, average_s=avg, drift=np.zeros(nch))


def sensor_rows(y_fine: np.ndarray, dt_fine: float, steps_per_row: int, n_rows: int,
                chain) -> np.ndarray:
    """What the converter returns at rows ``0 .. n_rows - 1``, ``(n_rows, nch)``: the
    response at the sensors on a fine grid (``steps_per_row`` steps per row, at least
    :data:`offline.chain.MIN_STEPS_PER_ROW` where the converter averages) through each
    sensor's high-pass and moving average (:func:`offline.chain.sensor_outputs`), then the
    converter (:func:`convert`; ``ideal``: point samples). No noise and no drifting offset."""
    dyn = _sensor_dynamics(chain, np.shape(y_fine)[1])
    y = y_fine if dyn is None else sensor_outputs(y_fine, dt_fine, dyn)
    if chain is None or chain.ideal:
        return np.asarray(y)[::steps_per_row][:n_rows]
    return convert(y, dt_fine, steps_per_row, n_rows, chain)


def convert(y_fine: np.ndarray, dt_fine: float, steps_per_row: int, n_rows: int,
            chain) -> np.ndarray:
    """Each column of ``y_fine`` (the response on the fine grid, node 0 at row 0) through
    ``chain`` (:class:`edge.acquisition.Chain`: its taps, the window of channel ``j`` ending
    ``offsets[j]`` before the row) at rows ``0 .. n_rows - 1``, ``(n_rows, nch)``::

        y_r,j = sum_i h_i y(t_r - offset_j - i spacing)

    (linear between fine nodes; at rest before node 0, the last value after the end)."""
    nch = np.shape(y_fine)[1]
    return conversions(y_fine, dt_fine, steps_per_row, n_rows, chain.drate,
                       -chain.offsets_for(nch), taps=chain.taps())


def _declared_forces(spec, cal, tf, dt: float, seed: int) -> np.ndarray:
    """The ``[design_load]`` load of each force (its own realisation, seed ``seed + 1000 i``)
    times its ``scale`` on the grid ``tf``, ``(nt, nf)``."""
    Ff = np.zeros((tf.size, len(spec.forces)))
    for i, f in enumerate(spec.forces):
        sc = float(getattr(f, "scale", 1.0))
        if cal is None:
            Ff[:, i] = sc * load_profile("random", tf, band=(1.0, 0.4 / dt), rms=1.0,
                                         seed=seed + 1000 * i)
            continue
        ld = cal.load_for(f.name)
        if ld is None:
            continue
        Ff[:, i] = sc * load_profile(ld.type, tf, freq=ld.freq,
                                     amplitude=ld.amplitude or 1.0, band=ld.band,
                                     rms=ld.rms, seed=seed + 1000 * i)
    return Ff


def own_load_runs(rm, bundle, mm, runs, load_model=None) -> list[CalRun]:
    """The runs the stated std's model-error factor is measured on
    (:mod:`offline.smoother.std_scale`): ``runs`` where they drew their load from the
    smoother's own load model (``load_model``, learned from records), else as many runs drawn
    from the declaration's rational model, the one the smoother is designed with (its roll-off
    skirts and all), at ``runs``' noise. The declaration's runs have ideal band edges: on the
    frame of ``benchmarks/load_user`` no load reached its 261 Hz mode, which the reduction
    misses and the acceleration output a1z sees, so the factor stayed 1.0-1.12 and a load with
    a second-order roll-off gave a1z 5x its stated std (1-sigma coverage 9-40 %)."""
    if load_model is not None:
        return runs
    sigma = np.mean([r.sigma for r in runs], axis=0)
    own = declared_load_model(rm.spec, bundle.rate, noise_std=sigma)
    return calibration_runs(rm.spec, rm.model, rm.chan_dofs, rm.force_dofs, rm.out_dofs,
                            bundle.dt, seeds=[r.seed for r in runs], mm=mm, load_model=own,
                            chain=bundle.chain)
