"""Bayesian calibration: VB against MCMC (emcee) and nested sampling (dynesty), and the speed
goals of issue 17 (3 parameters < 2 s from a 4 s record at 1 kHz; 100 damage zones < 30 s).

    .venv/bin/python benchmarks/calibrate.py              # all parts
    .venv/bin/python benchmarks/calibrate.py --skip-zones # without the 100-zone run

Truth: the strip of tests/calib_truth.py with 34 elements, E = 66 GPa, a root spring of
6 N m/rad, Rayleigh damping 1.5 % at 30 and 200 Hz, exact modal integration (no Newmark),
random force 5-80 Hz, 1 % sensor noise; calibration model: 17 elements, CB with 4 modes,
parameters E, zeta, k_root (priors: log-normal, bounds at +-2 sigma). Every method samples
the same posterior: VB's tempered likelihood (weights from the residual autocorrelation) with
the Gamma noise prior, the noise precision integrated out for emcee and dynesty.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import warnings  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore", module="dynesty")
warnings.filterwarnings("ignore", module="emcee")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from calib_truth import model_text, truth_record  # noqa: E402
from offline.calibration.calibrate import calibrate  # noqa: E402
from offline.calibration.checks import mcmc_check  # noqa: E402
from offline.calibration.setup import from_model_file  # noqa: E402


def log_evidence_dynesty(res, nlive=100, seed=0):
    """log Z of the same posterior by dynesty (static nested sampling, noise integrated out)."""
    import dynesty
    from scipy.special import gammaln
    from scipy.stats import norm
    p = res.problem
    m0, s0 = p.m0, np.array([pr.std for pr in p.priors])
    groups = res.groups

    def loglike(xi):
        k, _ = p.residuals(xi, jac=False)
        out = 0.0
        for g, kk in zip(groups, k):
            c = g.c0 + 0.5 * g.weight * kk.size
            # log ∫ N(k; 0, Φ⁻¹)^w Ga(Φ; c0, s0) dΦ
            out += (gammaln(c) - gammaln(g.c0) - g.c0 * np.log(g.s0)
                    - 0.5 * g.weight * kk.size * np.log(2 * np.pi)
                    - c * np.log(1.0 / g.s0 + 0.5 * g.weight * kk @ kk))
        return out

    def prior_transform(u):
        return m0 + s0 * norm.ppf(u)

    n0 = p.n_evals
    t0 = time.perf_counter()
    ns = dynesty.NestedSampler(loglike, prior_transform, m0.size, nlive=nlive, sample="rwalk",
                               bootstrap=0, rstate=np.random.default_rng(seed))
    ns.run_nested(print_progress=False, dlogz=0.1)
    r = ns.results
    return float(r.logz[-1]), float(r.logzerr[-1]), p.n_evals - n0, time.perf_counter() - t0


def three_parameters(d, duration, mcmc_steps, nlive):
    truth = model_text(nel=34, E=66e9, k_root=6.0, ratios=(0.015, 0.015), params="")
    truth_record(d / "run.csv", truth, duration=duration, seed=1)
    (d / "model.toml").write_text(model_text())
    su = from_model_file(d / "model.toml")
    t0 = time.perf_counter()
    res = calibrate(su, [d / "run.csv"])
    t_vb = time.perf_counter() - t0
    out = {"duration": duration, "vb_s": t_vb, "vb_evals": res.problem.n_evals,
           "F": res.vb.F, "mean": res.theta.tolist(), "std": res.theta_std.tolist(),
           "nonlinearity": res.nonlinearity.tolist()}
    if mcmc_steps:
        c = mcmc_check(res, steps=mcmc_steps, burn=100)
        out["mcmc"] = c
    if nlive:
        out["dynesty"] = log_evidence_dynesty(res, nlive=nlive)
    return out


def zones(d, n_zones, duration):
    from calib_truth import damage_model_text, damage_params, damage_truth
    nel = n_zones
    truth = damage_model_text(2 * nel, modes=20) + damage_truth(n_zones, zone=n_zones // 3, omega=0.4)
    t = truth.replace("at = [0.0425, 0.0, 0.0]", f"at = [{0.17 * 5 / 20!r}, 0.0, 0.0]")
    truth_record(d / "z.csv", t, duration=duration, seed=3, band=(5.0, 100.0), n_modes=30)
    # reduced model: masters at the sensors, force and root only, 10 CB modes, 4 sub-steps
    # (the nominal-basis error for damaged states is the model's, not the benchmark's concern)
    model = damage_model_text(nel, damage_params(n_zones), modes=10)
    model = model.replace('[[reduction.masters]]\nselect = { box = [[0.001, -0.01, -0.01], '
                          '[0.2, 0.01, 0.01]] }\ndofs = ["uz"]\n', "")
    (d / "z.toml").write_text(model + "[bayes]\nsubsteps = 4\n")
    t0 = time.perf_counter()
    su = from_model_file(d / "z.toml")
    t_setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = calibrate(su, [d / "z.csv"])
    return {"zones": n_zones, "setup_s": t_setup, "vb_s": time.perf_counter() - t0,
            "evals": res.problem.n_evals, "dofs": su.pm.parts.n,
            "max_omega": float(res.theta.max()), "argmax": int(res.theta.argmax())}


def compare(d, a):
    print("== 3 parameters (E, zeta, k_root), 4 s record at 1 kHz: VB only (goal < 2 s)")
    r4 = three_parameters(d, 4.0, 0, 0)
    sys.stdout.flush()
    print(f"   VB {r4['vb_s']:.2f} s, {r4['vb_evals']} model runs, F = {r4['F']:.2f}; "
          f"E {r4['mean'][0] / 1e9:.3f} +- {r4['std'][0] / 1e9:.3f} GPa (truth 66), "
          f"k_root {r4['mean'][2]:.3f} +- {r4['std'][2]:.3f} (truth 6)")
    print("== same posterior, 1 s record: VB vs emcee vs dynesty")
    r1 = three_parameters(d, 1.0, a.mcmc_steps, a.nlive)
    c = r1["mcmc"]
    lz, lzerr, nz, tz = r1["dynesty"]
    print("   | method | time [s] | model runs | result |")
    print("   | --- | --- | --- | --- |")
    print(f"   | VB | {r1['vb_s']:.2f} | {r1['vb_evals']} | F = {r1['F']:.3f} |")
    print(f"   | emcee ({c['walkers']} x {c['steps']}) | {c['seconds']:.1f} | "
          f"{c['model_evaluations']} | max |mean - VB| = {c['max_mean_dev_sigma']:.3f} sigma, "
          f"std ratio {np.round(c['std_ratio'], 3).tolist()} |")
    print(f"   | dynesty (nlive {a.nlive}) | {tz:.1f} | {nz} | log Z = {lz:.3f} +- {lzerr:.3f}, "
          f"|F - log Z| = {abs(r1['F'] - lz):.3f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mcmc-steps", type=int, default=2000)
    ap.add_argument("--nlive", type=int, default=100)
    ap.add_argument("--skip-zones", action="store_true")
    ap.add_argument("--zones", type=int, default=100)
    ap.add_argument("--only-zones", action="store_true")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if not a.only_zones:
            compare(d, a)
        if not a.skip_zones or a.only_zones:
            print(f"== {a.zones} damage zones (goal < 30 s)")
            z = zones(d, a.zones, 0.5)
            print(f"   setup {z['setup_s']:.1f} s, VB {z['vb_s']:.1f} s, {z['evals']} model runs, "
                  f"{z['dofs']} reduced DOFs; largest omega {z['max_omega']:.3f} in zone "
                  f"{z['argmax']} (truth: zone {a.zones // 3} at 0.4)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
