"""End to end model update: the structure changes mid-run, the inverse map identifies the new
parameter, the estimator's model is updated and swapped, the virtual-sensor accuracy recovers.

    /work/venv/bin/python benchmarks/model_update.py                       # E -10 %, cantilever_params.toml
    /work/venv/bin/python benchmarks/model_update.py --change k_root=5     # a looser clamp instead
    /work/venv/bin/python benchmarks/model_update.py --model M.toml --bundle B.npz

The rig (truth) is the *full* FE model of the model file (exact modal superposition with
static correction, as ``offline.simulate.simulate_modal``), whose parameters switch at a fine
time step: the modal state of the old model is carried over through the physical state
(``u = Φ_a q_a``, ``q_b = Φ_bᵀ M_b u``; same for the velocity). Only edge components run the
estimation: ``Estimator.process`` block by block, ``edge.inverse.WindowCapture`` and
``InverseRuntime.identify`` on the captured stream, ``edge.inverse.update_model`` and
``Estimator.swap`` between two blocks.
The channels the estimators and the capture read are the rig's response converted by the
model file's measurement chain on the rig's fine grid (:class:`offline.calibration.
measurement.Measurement`): the ADS1256's conversions for examples/cantilever_params.toml (no
``[acquisition]``), as the device's ADC records them whatever the estimator models; point
samples for a file that declares ``[acquisition] converter = "ideal"``
(tests/test_model_update.py).

Timeline (all phases at the bundle's rate, blocks of ``block`` samples):

  A  random load, nominal structure                      FDE "before change"
  B  random load, structure changed (e.g. E -10 %)       FDE "after change" (not yet updated)
  Q  load off: the structure rings down to rest ([experiment] initial = "rest")
  X  known excitation of [experiment] (the pulse), window captured from the stream
     -> identify -> update_model -> swap between two blocks (no sample dropped)
  R  random load again, changed structure                FDE "after update", and of an
                                                          estimator that was never updated
FDE: paper 004 eq. 33 of the displacement at the reference point (output ``d60``, 60 mm) in
the load band, over each random phase after ``settle`` seconds. A, B and R get the same random
load realisation, so their FDEs differ by the model only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one BLAS thread, as on the Pi (operator-update timing)

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from edge import inverse as EI  # noqa: E402
from edge.estimator import Estimator  # noqa: E402
from offline._deps import need, progress as _progress  # noqa: E402
from offline.report import nrmse_full_band  # noqa: E402

EXAMPLE = ROOT / "examples" / "cantilever_params.toml"


# ============================================================================ the rig (truth)
def full_model(model_path, params: dict):
    """Constrained full FE model of ``model_path`` with ``[[parameters]]`` values replaced.

    Parameters
    ----------
    params : dict {parameter name: value [SI]}
        Names of ``[[parameters]]`` of kind modulus, spring or mass (a damping ratio has no
        full-model counterpart: the file's ``[damping]`` stays).
    """
    from offline.inverse import spec as ispec
    from offline.inverse.fromfile import _edit
    from offline.model import build_fe_model, load_model_file, spec_from_dict

    spec = load_model_file(model_path)
    where = spec.where("").rstrip(": ")
    plist, _, _ = ispec.parse(spec.raw, where)
    by = {p.name: p for p in plist}
    bad = sorted(set(params) - {n for n, p in by.items() if p.kind != "damping_ratio"})
    if bad:
        raise ValueError(f"{where}: change {bad}: not a modulus/spring/mass [[parameters]] name "
                         f"(have {sorted(by)})")
    raw = _edit(spec.raw, [by[n] for n in params], [params[n] for n in params], where)
    return build_fe_model(spec_from_dict(raw, spec.path), progress=False)


@dataclass
class _Modal:
    lam: np.ndarray   # (m,) ω² [rad²/s²]
    zeta: np.ndarray  # (m,) modal damping ratios c_i / (2 ω_i)
    Phi: np.ndarray   # (N, m) mass-normalised
    M: object         # sparse (N, N)
    A: np.ndarray     # (m, 2, 2) exact transition of (q, q')
    G0: np.ndarray    # (m, 2)
    G1: np.ndarray    # (m, 2)
    Rp: np.ndarray    # (np, nf) residual flexibility at the probes


def _modal(model, force_dofs, probe_dofs, dt_fine, n_modes) -> _Modal:
    from edge.estimator.expm import foh_matrices
    from offline.reduction.eigen import modes

    spla = need("scipy.sparse.linalg")
    m = int(min(n_modes, model.n_dofs - 2))
    md = modes(model.K, model.M, m)
    lam, Phi = np.clip(md.lam, 0.0, None), md.Phi
    C = model.damping_matrix()
    c = np.einsum("ij,ij->j", Phi, C @ Phi)  # diagonal of Φᵀ C Φ
    A = np.zeros((m, 2, 2))
    G0 = np.zeros((m, 2))
    G1 = np.zeros((m, 2))
    for i in range(m):
        # q'' + c_i q' + ω_i² q = φ_iᵀ f  as a first-order system, exact for f linear in a step
        Ai, g0, g1 = foh_matrices(np.array([[0.0, 1.0], [-lam[i], -c[i]]]),
                                  np.array([[0.0], [1.0]]), dt_fine)
        A[i], G0[i], G1[i] = Ai, g0[:, 0], g1[:, 0]
    B = np.zeros((model.n_dofs, len(force_dofs)))
    B[force_dofs, np.arange(len(force_dofs))] = 1.0
    KinvB = spla.splu(model.K.tocsc()).solve(B)
    # residual flexibility (K⁻¹ - Φ diag(1/ω²) Φᵀ) B at the probes (mode-acceleration method)
    Rp = KinvB[probe_dofs] - (Phi[probe_dofs] / lam) @ Phi[force_dofs].T
    # ζ_i = φ_iᵀ C φ_i / (2 ω_i)
    zeta = c / (2.0 * np.sqrt(np.maximum(lam, 1e-300)))
    return _Modal(lam, zeta, Phi, model.M, A, G0, G1, Rp)


def switching_run(models, switch_at, force_dofs, F_fine, dt_fine, decim, probe_dofs,
                  n_modes=80, progress=False) -> np.ndarray:
    """Displacements at ``probe_dofs`` of a full model whose matrices switch during the run.

    Parameters
    ----------
    models : list of FEModel, length s (same DOF table)
    switch_at : list of int, length s - 1, increasing
        Fine step at which ``models[i+1]`` takes over; the physical state (u, v) carries over.
    force_dofs : (nf,) int; F_fine : (nt, nf) [N] on the fine grid; dt_fine [s]
    decim : int   fine steps per output sample
    probe_dofs : (np,) int   full-model DOFs whose displacement is recorded

    Returns
    -------
    ndarray, shape ((nt - 1) // decim + 1, np)   [m]
    """
    force_dofs = np.asarray(force_dofs, dtype=int)
    probe_dofs = np.asarray(probe_dofs, dtype=int)
    if len(switch_at) != len(models) - 1 or list(switch_at) != sorted(switch_at):
        raise ValueError("switch_at: need len(models) - 1 increasing fine-step indices")
    md = [_modal(m, force_dofs, probe_dofs, dt_fine, n_modes) for m in models]
    return _integrate(md, switch_at, force_dofs, F_fine, decim, probe_dofs, progress)


def _integrate(md, switch_at, force_dofs, F_fine, decim, probe_dofs, progress=False):
    nt = F_fine.shape[0]
    out = np.zeros(((nt - 1) // decim + 1, len(probe_dofs)))
    cur = md[0]
    q = np.zeros(cur.lam.size)
    qd = np.zeros(cur.lam.size)
    P = cur.Phi[force_dofs].T
    p_prev = P @ F_fine[0]
    out[0] = cur.Phi[probe_dofs] @ q + cur.Rp @ F_fine[0]
    nxt = 1
    for k in _progress(range(nt - 1), desc="full-model rig", enable=progress, mininterval=0.5):
        if nxt < len(md) and k == switch_at[nxt - 1]:
            new = md[nxt]
            # u = Φ_a q_a  ->  q_b = Φ_bᵀ M_b u  (mass-orthonormal modes), same for velocities
            u, v = cur.Phi @ q, cur.Phi @ qd
            q, qd = new.Phi.T @ (new.M @ u), new.Phi.T @ (new.M @ v)
            cur, nxt = new, nxt + 1
            P = cur.Phi[force_dofs].T
            p_prev = P @ F_fine[k]
        p_new = P @ F_fine[k + 1]
        A, G0, G1 = cur.A, cur.G0, cur.G1
        q, qd = (A[:, 0, 0] * q + A[:, 0, 1] * qd + G0[:, 0] * p_prev + G1[:, 0] * p_new,
                 A[:, 1, 0] * q + A[:, 1, 1] * qd + G0[:, 1] * p_prev + G1[:, 1] * p_new)
        p_prev = p_new
        if (k + 1) % decim == 0:
            out[(k + 1) // decim] = cur.Phi[probe_dofs] @ q + cur.Rp @ F_fine[k + 1]
    return out


# ============================================================================ the scenario
@dataclass
class Scenario:
    """Phase lengths [s] and rig settings of the end-to-end run (see module docstring)."""

    change: dict                       # {parameter: new value} of the structure
    before: float = 4.0                # A
    after: float = 4.0                 # B
    quiet: float = 6.0                 # Q: ring-down to rest before the known excitation
    resume: float = 4.0                # R
    settle: float = 0.25               # transient excluded from each FDE segment
    band: tuple = (5.0, 160.0)         # random load band and FDE band [Hz]
    rms: float = 1.0                   # random load RMS [N]
    block: int = 50                    # samples per estimator block
    oversample: int = 4                # rig fine steps per sample
    n_modes: int = 80                  # full-model modes in the rig
    noise: float | None = None         # sensor noise std [SI]; None: the map's training noise
    seed: int = 0
    apply: str = "all"                 # "all" identified parameters, or "changed" ones only


@dataclass
class Result:
    fde: dict                          # {"before", "after_change", "after_update", "never_updated", "oracle"}
    identified: dict                   # {name: value}
    std: dict
    true: dict
    out_of_range: bool
    update_ms: float
    identify_ms: float
    samples: int
    processed: dict
    residual_at_pulse: float           # |y| at the pulse start / peak |y| of the pulse window
    info: dict = field(default_factory=dict)

    def format(self) -> str:
        f = self.fde
        lines = [f"displacement FDE at the reference point ({self.info['output']}, "
                 f"{self.info['band'][0]:g}-{self.info['band'][1]:g} Hz, eq. 33):",
                 f"  before change                 {f['before']:.4f}",
                 f"  after change (not updated)    {f['after_change']:.4f}   "
                 f"(same phase R, never updated: {f['never_updated']:.4f})",
                 f"  after update (identified)     {f['after_update']:.4f}",
                 f"  after update (true params)    {f['oracle']:.4f}   (oracle)",
                 "identified vs true:"]
        for n, v in self.identified.items():
            t = self.true.get(n)
            err = f"  error {100 * (v / t - 1):+.2f} %" if t else ""
            lines.append(f"  {n:8s} {v:.5g} ± {self.std[n]:.2g}  (true {t if t is None else f'{t:.5g}'}){err}")
        lines += [f"  out_of_range {self.out_of_range}, residual motion at the pulse "
                  f"{100 * self.residual_at_pulse:.3f} % of the pulse peak",
                  f"identify (features + ONNX) {self.identify_ms:.3f} ms; update_model + swap "
                  f"{self.update_ms:.2f} ms (block period {self.info['block_ms']:g} ms)",
                  f"samples streamed {self.samples}, processed by the updated estimator "
                  f"{self.processed['updated']}, by the reference {self.processed['reference']}"]
        return "\n".join(lines)


def run(model_path, bundle, sc: Scenario, map_name=None, progress=False) -> Result:
    """Run the scenario on the full model of ``model_path`` with the edge pieces of ``bundle``.

    ``bundle`` must carry the inverse maps and parametric parts (``vsense-offline build`` of a
    model file with ``[[parameters]]``), a displacement channel and at least one output.
    """
    from offline.calibration.measurement import Measurement
    from offline.metrics import fde
    from offline.model import load_model_file, resolve_dofs
    from offline.simulate import load_profile

    rt = EI.InverseRuntime.from_bundle(bundle)  # ONNX sessions, check set verified
    imap = rt.get(map_name)
    parts = rt.parts
    spec = load_model_file(model_path)
    nominal = {n: float(v) for n, v in zip(parts.names, parts.theta0)}
    true = {**nominal, **{k: float(v) for k, v in sc.change.items()}}
    m0 = full_model(model_path, {k: nominal[k] for k in sc.change})
    m1 = full_model(model_path, {k: float(v) for k, v in sc.change.items()})
    # full-model DOFs of channels, forces, outputs (same selections as offline.build)
    ch_dofs = [resolve_dofs(m0, s.select, s.dof, s.name)[0] for s in spec.sensors]
    f_dofs = [resolve_dofs(m0, f.select, f.dof, f.name)[0] for f in spec.forces]
    o_dofs = [resolve_dofs(m0, o.select, o.dof, o.name)[0] for o in spec.outputs]
    for s in spec.sensors:
        if s.kind != "displacement":
            raise ValueError(f"{model_path}: [[sensors]] {s.name!r}: the rig records displacements "
                             f"only, got {s.kind!r}")
    if not o_dofs:
        raise ValueError(f"{model_path}: [[outputs]]: the scenario scores an output, none given")
    exc = imap.experiment["excitation"]
    at = exc.get("at", spec.forces[0].name)
    fi = [f.name for f in spec.forces].index(at)
    rate, dt = 1.0 / bundle.dt, bundle.dt
    if abs(imap.rate - rate) > 1e-9 * rate:
        raise ValueError(f"map {imap.name!r} runs at {imap.rate:g} Hz, the bundle at {rate:g} Hz")
    nb = int(sc.block)

    def blocks(sec):  # phase lengths rounded to whole blocks
        return int(round(sec * rate / nb)) * nb

    nA, nB, nQ, nR = (blocks(x) for x in (sc.before, sc.after, sc.quiet, sc.resume))
    nX = -(-imap.n // nb) * nb   # the experiment window, padded to whole blocks
    kB, kQ, kX = nA, nA + nB, nA + nB + nQ
    kR = kX + nX
    n = kR + nR
    # ---- force history on the fine grid: random load in A, B, R; off in Q; pulse in X
    d = int(sc.oversample)
    tf = np.arange((n - 1) * d + 1) * dt / d
    Ff = np.zeros((tf.size, len(f_dofs)))
    # the SAME random load realisation in A, B and R (FDEs of the phases then differ by the
    # model, not by the load): one segment of the longest phase, truncated to each phase
    nmax = max(nA, nB, nR) * d
    seg_f = load_profile("random", np.arange(nmax) * dt / d, band=sc.band, rms=sc.rms, seed=sc.seed)
    for k_start, k_len in ((0, nA), (kB, nB), (kR, nR)):
        dst = Ff[k_start * d:(k_start + k_len) * d, fi]   # a view (R ends one step short)
        dst[:] = seg_f[:dst.size]
    g = EI.excitation_signal(exc, imap.n, rate, substeps=d)
    Ff[kX * d:kX * d + g.size, fi] += g
    # ---- the rig: full model, parameters switch at the start of phase B
    probes = np.array(ch_dofs + o_dofs)
    md = [_modal(m, np.array(f_dofs), probes, dt / d, sc.n_modes) for m in (m0, m1)]
    # every fine step recorded: the channels are converted there by the model file's chain
    # (what the device records: the ADS1256's conversions for a file without [acquisition],
    # whatever its estimator models; the window the maps were trained on; exact below the
    # fine grid's Nyquist frequency; point samples for an ideal chain), kept at the rows
    Yfine = _integrate(md, [kB * d], np.array(f_dofs), Ff, 1, probes, progress)
    Yall = Yfine[::d].copy()
    nc = len(ch_dofs)
    Yall[:, :nc] = Measurement(spec.chain(), dt / d, nc).apply(Yfine[:, :nc])[::d]
    # the rig's damping comes from the file's [damping]: its "true" damping ratio is the mean
    # modal ratio of the changed structure at the modes where the map's Rayleigh model has ζ
    for name, kind in zip(parts.names, parts.kinds):
        if kind == "damping_ratio" and name not in sc.change:
            true[name] = float(np.mean([md[1].zeta[int(i) - 1] for i in parts.modes]))
    Yc, Ztrue = Yall[:, :len(ch_dofs)], Yall[:, len(ch_dofs):]
    sig = np.asarray(imap.meta.get("noise_sigma", [0.0] * len(ch_dofs)), float) \
        if sc.noise is None else np.full(len(ch_dofs), float(sc.noise))
    rng = np.random.default_rng(sc.seed + 1)
    Y = Yc + rng.standard_normal(Yc.shape) * sig
    F_true = Ff[::d]
    # ---- the edge: estimators block by block; capture, identify, update, swap
    est = Estimator(bundle)            # updated from identified parameters
    ref = Estimator(bundle)            # never updated
    ora = Estimator(bundle)            # updated with the true parameters (oracle)
    ests = {"updated": est, "reference": ref, "oracle": ora}
    Z = {k: np.full((n, len(bundle.outputs)), np.nan) for k in ests}
    Fe = {k: np.full((n, len(bundle.forces)), np.nan) for k in ests}
    cap = EI.WindowCapture(imap.n, imap.nch)
    ch_idx = [[c.name for c in bundle.channels].index(c) for c in imap.experiment["channels"]]
    res = None
    t_upd = float("nan")
    for k0 in range(0, n, nb):
        Yb = np.ascontiguousarray(Y[k0:k0 + nb])
        for key, e in ests.items():
            fl = np.empty(Yb.shape[0], np.uint8)
            e.process(Yb, Fe[key][k0:k0 + nb], Z[key][k0:k0 + nb], fl)
        if k0 == kX - nb:
            cap.arm()                  # the capture starts with the next sample (the pulse)
        elif cap.armed or k0 >= kX:
            w = cap.push(Yb[:, ch_idx])
            if w is not None:
                res = rt.identify(w, imap.name)
                if res["out_of_range"]:
                    raise RuntimeError(f"identification flagged out of range: {res}")
                vals = dict(zip(res["names"], res["values"]))
                if sc.apply == "changed":
                    vals = {k: v for k, v in vals.items() if k in sc.change}
                # between two blocks: rebuild M̂, Ĉ, K̂ for θ, derive the operator, swap
                t0 = time.perf_counter()
                op, nbund, _ = EI.update_model(parts, est.bundle, vals)
                est.swap(op)
                est.bundle = nbund
                t_upd = (time.perf_counter() - t0) * 1e3
                op_o, nb_o, _ = EI.update_model(parts, ora.bundle, true)
                ora.swap(op_o)
                ora.bundle = nb_o
    if res is None:
        raise RuntimeError("the experiment window was never completed")
    oi = 0
    s = int(round(sc.settle * rate))

    dl = est.delay  # output row j describes sample j - delay (window L: L - 1 samples)

    def aligned(key, a, b, X=Z, T=Ztrue, i=oi):  # estimate rows lined up with the truth's
        return X[key][a + s + dl:b, i], T[a + s:b - dl, i]

    def seg(*where, **kw):
        return float(fde(*aligned(*where, **kw), dt, band=sc.band).value)

    def nrmse(*where):  # RMS(estimate - truth) / std(truth), full band
        return nrmse_full_band(*aligned(*where))

    where = {"before": ("updated", 0, kB), "after_change": ("reference", kB, kQ),
             "never_updated": ("reference", kR, n), "after_update": ("updated", kR, n),
             "oracle": ("oracle", kR, n)}
    fd = {k: seg(*w) for k, w in where.items()}
    nr = {k: nrmse(*w) for k, w in where.items()}
    fdf = {k: seg(k, kR, n, Fe, F_true, 0) for k in ests}
    fdf["before"] = seg("updated", 0, kB, Fe, F_true, 0)
    win = Yc[kX:kX + imap.n, ch_idx]
    resid = float(np.abs(Yc[kX, ch_idx]).max() / np.abs(win).max())
    return Result(fde=fd, identified=dict(zip(res["names"], res["values"])),
                  std=dict(zip(res["names"], res["std"])), true=true,
                  out_of_range=bool(res["out_of_range"]), update_ms=t_upd,
                  identify_ms=float(res["infer_ms"]), samples=n,
                  processed={k: e.samples_seen for k, e in ests.items()},
                  residual_at_pulse=resid,
                  info={"output": bundle.outputs[oi].name, "band": sc.band,
                        "block_ms": nb * dt * 1e3, "force_fde": fdf, "nrmse": nr,
                        "phases": {"A": (0, kB), "B": (kB, kQ), "Q": (kQ, kX), "X": (kX, kR),
                                   "R": (kR, n)}})


# ============================================================================ command line
def _change(s: str):
    try:
        k, v = s.split("=")
        return k.strip(), v.strip()
    except ValueError:
        raise argparse.ArgumentTypeError(f"--change: expected NAME=VALUE or NAME=-10%, got {s!r}") \
            from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(EXAMPLE))
    p.add_argument("--bundle", default=None, help="bundle with maps (default: build it, cached)")
    p.add_argument("--change", type=_change, action="append", default=None,
                   help="NAME=VALUE or NAME=-10%% (default E=-10%%)")
    p.add_argument("--apply", choices=("all", "changed"), default="all",
                   help="apply all identified parameters (as the daemon does) or only the changed ones")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet-time", type=float, default=6.0, help="ring-down before the pulse [s]")
    a = p.parse_args(argv)
    from edge.bundle import Bundle

    t0 = time.perf_counter()
    if a.bundle:
        bundle = Bundle.load(a.bundle)
    else:
        from offline.build import build
        bundle = build(a.model, progress=True).bundle
    t_build = time.perf_counter() - t0
    parts = EI.InverseRuntime.from_bundle(bundle).parts
    nominal = dict(zip(parts.names, parts.theta0))
    change = {}
    for k, v in a.change or [("E", "-10%")]:
        if k not in nominal:
            p.error(f"--change: {k!r} is not a parameter of the bundle ({list(nominal)})")
        change[k] = nominal[k] * (1 + float(v[:-1]) / 100) if v.endswith("%") else float(v)
    sc = Scenario(change=change, seed=a.seed, apply=a.apply, quiet=a.quiet_time)
    t1 = time.perf_counter()
    r = run(a.model, bundle, sc, progress=True)
    print(f"model {Path(a.model).name}: change {change} at t = {sc.before:g} s "
          f"(build {t_build:.1f} s, scenario {time.perf_counter() - t1:.1f} s)")
    print(r.format())
    print("force FDE in phase R: " + ", ".join(f"{k} {v:.4f}" for k, v in r.info["force_fde"].items()))
    print(f"displacement normalised RMS error ({r.info['output']}, full band, "
          "RMS(estimate - truth) / std(truth)): "
          + ", ".join(f"{k} {v:.4f}" for k, v in r.info["nrmse"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
