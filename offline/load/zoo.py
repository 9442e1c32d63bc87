"""A zoo of realistic loads and records of them, for tests and benchmarks.

Real loads are never the ideal band a user declares: they roll off gently, follow 1/f, carry
a resonance of the structure that drives them, or are another size. Each entry of
:data:`ZOO` is the TRUE load model of such a load against the declaration "random 5-160 Hz,
1 N"; :func:`record` simulates the full model under any load model with the sensors' noise.
"""

from __future__ import annotations

import numpy as np

from edge.csvio import write_table
from edge.kinds import kind_order
from offline.calibration_runs import run_modal
from offline.chain import SensorDynamics, conversions, refine_grid
from offline.forcing.component import Component
from offline.forcing.force_model import ForceModel
from offline.limit.transfer import modal_model
from offline.load.model import LoadModel
from offline.model import resolve_dofs, sensor_probe
from offline.model.strip import strip_head
from offline.simulate import model_chain, simulate_sparse

#: The zoo's structure: the demo rig's 170 x 13 x 1.2 mm aluminium strip as 34
#: Euler-Bernoulli beam elements, one laser at 110 mm, the force there, the displacement at
#: 60 mm as the virtual output, 1 kHz; the user's declaration: random 5-160 Hz, 1 N, 1 % noise.
STRIP = strip_head(34, "zoo-strip") + """
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 8
[[reduction.masters]]
select = { at = [0.170, 0.0, 0.0] }
dofs = ["uz"]
[estimator]
rate = 1000.0
# the records of the tests (:func:`record`) are point samples of the full model
[acquisition]
converter = "ideal"
[[sensors]]
name = "d110"
select = { at = [0.110, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
[[forces]]
name = "F110"
select = { at = [0.110, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "d60"
select = { at = [0.060, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[design_load]
load = { type = "random", band = [5.0, 160.0], rms = 1.0 }
duration = 2.0
"""


#: The strip as the edge reads it: no ``[acquisition]``, so the default chain (the ADS1256
#: in continuous mode at 1,000 SPS) in the bundle and in :func:`record`.
STRIP_CHIP = STRIP.replace(
    '# the records of the tests (:func:`record`) are point samples of the full model\n'
    '[acquisition]\nconverter = "ideal"\n', "")


def _band(order=2, rms=1.0, band=(5.0, 160.0), **kw) -> ForceModel:
    return ForceModel("bandpass", band, rms, order, **kw)


#: name -> the true load model (one force; the declaration: random 5-160 Hz, 1 N)
ZOO = {
    "rolloff-1": LoadModel([_band(1)]),
    "rolloff-2": LoadModel([_band(2)]),
    "rolloff-4": LoadModel([_band(4)]),
    "pink": LoadModel([_band(2, tilt=1.0)]),
    "resonance": LoadModel([_band(2, peaks=((75.0, 0.02, 6.0),))]),
    "level/50": LoadModel([_band(16, rms=0.02)]),
    "ideal": LoadModel([_band(16)]),
}


def _respond(model, fd, probes, kinds, F, dt_f, decim, engine):
    """The full model's probes at every ``decim``-th step of the force grid ``F`` (step
    ``dt_f``): sparse Newmark on every DOF or exact modal superposition."""
    if engine == "newmark":
        return simulate_sparse(model.M, model.damping_matrix(), model.K, np.array(fd), F,
                               dt_f, decim, list(zip(probes, kinds)), progress=False)
    return run_modal(modal_model(model, fd, probes), F, dt_f, decim, kinds)


def record(spec, model, lm: LoadModel, seconds: float, seed: int, noise=0.01,
           oversample: int = 10, warmup: float = 1.0, engine: str = "newmark",
           levels=None):
    """A record of the full model under load model ``lm``.

    Parameters
    ----------
    spec, model : the model file and its full FE model
    seconds : record length after ``warmup`` [s]; seed : of the load and the noise
    noise : relative noise std per channel (of the record's own signal std), or None with
        ``spec``'s absolute ``noise_std`` per sensor
    engine : "newmark" (sparse Newmark on every DOF, :func:`offline.simulate.simulate_sparse`)
        or "modal" (exact modal superposition, :func:`offline.calibration_runs.run_modal`)
    levels : optional (nt_samples,) factor on the load per sample (a load that changes size)

    The sensors go through the model file's measurement chain (``spec.chain()``, as
    ``vsense-offline simulate`` converts: the ADS1256 when the file declares no
    ``[acquisition]``; :mod:`offline.chain`), on a grid refined to at least
    :data:`offline.chain.MIN_STEPS_PER_ROW` steps per row; ``converter = "ideal"``: point
    samples at the rows. The truth ``F``, ``Z`` stays point values.

    Returns
    -------
    Y (ns, nch) noisy sensors, F (ns, nf) forces, Z (ns, nout) true outputs
    """
    dt = 1.0 / spec.estimator.rate
    cd = [sensor_probe(model, s, s.name) for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    od = [resolve_dofs(model, o.select, o.dof, o.name)[0] for o in spec.outputs]
    # derivative order of each probe (a strain/stress reads the displacements)
    kinds = [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind)
                                                         for o in spec.outputs]
    nw = int(round(warmup / dt))
    ns = int(round(seconds / dt)) + nw
    tf = np.arange(ns * oversample + 1) * dt / oversample
    Ff = lm.sample(tf, seed)
    if levels is not None:
        g = np.concatenate([np.full(nw, levels[0]), np.asarray(levels, dtype=float)])
        Ff *= np.interp(tf, np.arange(g.size) * dt, g)[:, None]
    if engine not in ("newmark", "modal"):
        raise ValueError(f"engine must be 'newmark' or 'modal', got {engine!r}")
    nch = len(cd)
    if SensorDynamics.of(spec.sensors).any:
        raise ValueError(f"{spec.path}: [[sensors]] highpass_hz/average_s/drift are not "
                         "simulated by the zoo's records; use vsense-offline simulate")
    ch = model_chain(spec, "model", None, None, 1.0 / dt, oversample)
    if ch.kind == "ideal":
        out = _respond(model, fd, cd + od, kinds, Ff, dt / oversample, oversample, engine)
        Yc = out[:, :nch]
    else:  # each channel converted over its window at its own instant (offline.chain)
        sub = oversample * ch.refine
        Fr = refine_grid(Ff, ch.refine, ch.pad_steps(dt / sub))
        fine = _respond(model, fd, cd + od, kinds, Fr, dt / sub, 1, engine)
        Yc = conversions(fine[:, :nch], dt / sub, sub, ns, ch.drate, ch.offsets, taps=ch.taps)
        out = fine[:(ns - 1) * sub + 1:sub]
    out, Yc = out[nw:ns], Yc[nw:ns]
    rng = np.random.default_rng(seed + 7)
    if noise is None:
        sd = np.array([s.noise_std for s in spec.sensors], dtype=float)
    else:
        sd = noise * np.std(Yc, axis=0)
    return Yc + sd * rng.standard_normal(Yc.shape), Ff[::oversample][nw:ns], out[:, nch:]


#: A free-free receiver (1 m steel beam, 40 elements, bending in x-z) loaded at an interface
#: by two forces and two moments; ten accelerometers at 400 Hz, 20 dB SNR. The declaration:
#: random 5-160 Hz with each load's own size (forces 10 N, moments 0.2 N m).
RECEIVER = """
name = "zoo-receiver"
type = "beam"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[beam]
theory = "euler-bernoulli"
[beam.sections.main]
material = "steel"
rectangle = { b = 0.04, h = 0.02 }
[[beam.members]]
name = "span"
section = "main"
line = { start = [0.0, 0.0, 0.0], end = [1.0, 0.0, 0.0], n = 40 }
orientation = [0.0, 0.0, 1.0]
[[boundary]]
select = { box = [[-0.01, -0.01, -0.01], [1.01, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[damping]
ratios = [[20.0, 0.01], [180.0, 0.01]]
[reduction]
method = "gmr+"
modes = 30
[[reduction.masters]]
select = { at = [0.5, 0.0, 0.0] }
dofs = ["uz"]
[estimator]
rate = 400.0
""" + "".join(f"""
[[sensors]]
name = "a{i}"
select = {{ at = [{x:.3f}, 0.0, 0.0] }}
dof = "uz"
kind = "acceleration"
noise = 0.1
""" for i, x in enumerate((0.175, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.925, 1.0))) + """
[[forces]]
name = "F0"
select = { at = [0.0, 0.0, 0.0] }
dof = "uz"
scale = 10.0
[[forces]]
name = "M0"
select = { at = [0.0, 0.0, 0.0] }
dof = "ry"
scale = 0.2
[[forces]]
name = "F1"
select = { at = [0.1, 0.0, 0.0] }
dof = "uz"
scale = 10.0
[[forces]]
name = "M1"
select = { at = [0.1, 0.0, 0.0] }
dof = "ry"
scale = 0.2
[[outputs]]
name = "a_mid"
select = { at = [0.475, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
[[outputs]]
name = "u_tip"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[design_load]
load = { type = "random", band = [5.0, 160.0], rms = 1.0 }
duration = 2.0
"""


def source_load() -> LoadModel:
    """The receiver's loads: three modes of a source at 35, 90 and 150 Hz (3 % damping) that
    drive the two forces (~10 N) and the two moments (~0.3 N m, a 3-5 cm lever) along their
    interface directions, on a 10 % broadband floor per load::

        S_ff(f) = sum_m |h_m(f)|^2 v_m v_m^T + diag(floor_j(f))

    strongly correlated loads whose coherence and sign change from one source resonance to
    the next (one correlation for all frequencies cannot hold them)."""
    floors = [_band(2, rms=r, band=(5.0, 160.0)) for r in (1.0, 0.03, 1.0, 0.03)]
    # each mode's direction v [unit/sqrt(Hz)]: PSD v v^T far below it, / (2 zeta)^2 at it
    modes = [Component(35.0, 0.03, tuple(0.25 * np.array([1.0, 0.05, 0.8, -0.04]))),
             Component(90.0, 0.03, tuple(0.18 * np.array([1.0, -0.03, -0.9, 0.06]))),
             Component(150.0, 0.03, tuple(0.12 * np.array([0.6, 0.04, 0.5, 0.035])))]
    return LoadModel(forces=floors, components=modes)


def interface_load() -> LoadModel:
    """The load at the interface of ``benchmarks/load_user/interface.toml`` (a force and a
    moment at each of two nodes; declared: random 5-160 Hz, forces 10 N, moments 0.5 N m):
    each load rolls off gently (orders 1-3), F55 carries a 70 Hz resonance of its source, the
    force and the moment at each node are correlated (+0.6, -0.5) and one 40 Hz source mode
    drives all four along one direction::

        S_ff(f) = D(f) C D(f) + |h(f)|^2 v v^T

    sizes below the declaration (forces 3-4 N, moments 0.1-0.15 N m: a 3-4 cm lever)."""
    floors = [ForceModel("bandpass", (8.0, 120.0), 3.0, 3, hp_order=2, lp_order=3),
              ForceModel("bandpass", (6.0, 140.0), 0.12, 2, hp_order=1, lp_order=2),
              ForceModel("bandpass", (10.0, 150.0), 2.5, 2, hp_order=2, lp_order=2,
                         peaks=((70.0, 0.03, 4.0),)),
              ForceModel("bandpass", (6.0, 120.0), 0.09, 2, hp_order=1, lp_order=2)]
    corr = np.eye(4)
    corr[0, 1] = corr[1, 0] = 0.6
    corr[2, 3] = corr[3, 2] = -0.5
    mode = Component(40.0, 0.04, tuple(0.12 * np.array([1.0, 0.035, -0.7, 0.03])))
    return LoadModel(forces=floors, corr=corr, components=[mode])


def write_load_csv(path, lm: LoadModel, names, seconds: float, dt: float, seed: int,
                   oversample: int = 10) -> None:
    """A force history of ``lm`` for ``vsense-offline simulate --load csv`` (``time`` and one
    column per force, at ``dt / oversample``), ``seconds`` long."""
    t = np.arange(int(round(seconds / dt)) * oversample + 1) * dt / oversample
    write_table(path, t, lm.sample(t, seed), list(names))
