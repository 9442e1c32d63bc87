"""Bayesian calibration: VB against MCMC (emcee) and nested sampling (dynesty), and the speed
goals of issue 17 (3 parameters < 2 s from a 4 s record at 1 kHz; 100 damage zones < 30 s).

    .venv/bin/python benchmarks/calibrate.py              # all parts
    .venv/bin/python benchmarks/calibrate.py --skip-zones # without the 100-zone run
    .venv/bin/python benchmarks/calibrate.py --fde        # estimates after calibration

Truth: the strip of tests/calib_truth.py with 34 elements, E = 66 GPa, a root spring of
6 N m/rad, Rayleigh damping 1.5 % at 30 and 200 Hz, exact modal integration (no Newmark),
random force 5-80 Hz, 1 % sensor noise; calibration model: 17 elements, CB with 4 modes,
parameters E, zeta, k_root (priors: log-normal, bounds at +-2 sigma). The method comparison
runs on a small problem (E, k_root; the damping fixed; 0.5 s record) where a 61 x 61
quadrature gives an independent log Z: every method targets the same posterior, VB's tempered
likelihood (weights noise.spectral_weight) with the Gamma noise prior, the noise precision
integrated out for emcee, dynesty and the quadrature.
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

from calib_truth import PARAMS_3, model_text, truth_record  # noqa: E402
from offline.calibration.calibrate import calibrate  # noqa: E402
from offline.calibration.checks import mcmc_check  # noqa: E402
from offline.calibration.setup import from_model_file  # noqa: E402

PARAMS_2 = PARAMS_3.replace('[[parameters]]\nname = "zeta"\nkind = "damping_ratio"\n'
                            'bounds = [0.003, 0.05]\nnominal = 0.01\n', "")


def integrated_loglike(res):
    """ξ -> log ∫ p(y | ξ, Φ) p(Φ) dΦ: the likelihood with each group's Gamma noise precision
    integrated out (weights w included), the target of emcee, dynesty and the quadrature."""
    from scipy.special import gammaln
    p, groups = res.problem, res.groups

    def loglike(xi):
        k, _ = p.residuals(np.asarray(xi, float), jac=False)
        out = 0.0
        for g, kk in zip(groups, k):
            c = g.c0 + 0.5 * g.weight * kk.size
            # log ∫ N(k; 0, Φ⁻¹)^w Ga(Φ; c0, s0) dΦ
            out += (gammaln(c) - gammaln(g.c0) - g.c0 * np.log(g.s0)
                    - 0.5 * g.weight * kk.size * np.log(2 * np.pi)
                    - c * np.log(1.0 / g.s0 + 0.5 * g.weight * kk @ kk))
        return float(out)
    return loglike


def log_evidence_dynesty(res, nlive=200, seed=0, sample="unif"):
    """log Z of the same posterior by dynesty (static nested sampling, noise integrated out):
    (log Z, its error, model runs, seconds)."""
    import dynesty
    from scipy.stats import norm
    p = res.problem
    m0, s0 = p.m0, np.array([pr.std for pr in p.priors])
    loglike = integrated_loglike(res)

    def prior_transform(u):
        return m0 + s0 * norm.ppf(u)

    n0 = p.n_evals
    t0 = time.perf_counter()
    ns = dynesty.NestedSampler(loglike, prior_transform, m0.size, nlive=nlive, sample=sample,
                               bound="multi", rstate=np.random.default_rng(seed))
    ns.run_nested(print_progress=False, dlogz=0.05)
    r = ns.results
    return float(r.logz[-1]), float(r.logzerr[-1]), p.n_evals - n0, time.perf_counter() - t0


def log_evidence_grid(res, n=61, width=7.0):
    """log Z by the trapezoidal rule on an n^p grid over VB mean ± width VB std (p <= 2): an
    independent reference for dynesty's log Z and the bound F <= log Z."""
    p = res.problem
    m, sd = res.vb.m, res.vb.std
    if m.size > 2:
        raise ValueError("the quadrature reference is for 1 or 2 parameters")
    loglike = integrated_loglike(res)
    axes = [np.linspace(mi - width * si, mi + width * si, n) for mi, si in zip(m, sd)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, m.size)
    n0, t0 = p.n_evals, time.perf_counter()
    s0 = np.array([pr.std for pr in p.priors])
    # log prior N(m0, diag s0²) + log likelihood at every node
    lp = np.array([loglike(x) for x in grid]) - 0.5 * np.sum(((grid - p.m0) / s0) ** 2, axis=1) \
        - np.sum(np.log(s0)) - 0.5 * m.size * np.log(2 * np.pi)
    w = np.ones(n)
    w[[0, -1]] = 0.5
    W = np.prod(np.stack(np.meshgrid(*([w] * m.size), indexing="ij"), -1).reshape(-1, m.size), 1)
    cell = np.prod([ax[1] - ax[0] for ax in axes])
    top = lp.max()
    edge = lp.reshape([n] * m.size)
    edge_max = max(float(np.max(np.take(edge, i, axis=a))) for a in range(m.size) for i in (0, -1))
    logz = float(top + np.log(np.sum(W * np.exp(lp - top)) * cell))
    return logz, edge_max - top, p.n_evals - n0, time.perf_counter() - t0


def strip_problem(d, duration, params=PARAMS_3, seed=1):
    """Truth record and calibration model file of the module docstring; returns the setup."""
    truth = model_text(nel=34, E=66e9, k_root=6.0, ratios=(0.015, 0.015), params="")
    truth_record(d / f"run{duration}.csv", truth, duration=duration, seed=seed)
    (d / "model.toml").write_text(model_text(ratios=(0.015, 0.015), params=params))
    return from_model_file(d / "model.toml"), d / f"run{duration}.csv"


def speed(d):
    """3 parameters from a 4 s record: a fresh process's first run (imports, numba cache) and
    the VB run itself."""
    su, rec = strip_problem(d, 4.0)
    t0 = time.perf_counter()
    calibrate(su, [rec])
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = calibrate(su, [rec])
    return res, cold, time.perf_counter() - t0


def small(d, mcmc_steps, nlive):
    """VB, emcee, dynesty and a quadrature on the same 2-parameter posterior (E, k_root;
    damping fixed at the truth's 1.5 %), 0.5 s record."""
    su, rec = strip_problem(d, 0.5, PARAMS_2)
    t0 = time.perf_counter()
    res = calibrate(su, [rec])
    out = {"vb": (time.perf_counter() - t0, res.problem.n_evals, res.vb.F), "res": res}
    if mcmc_steps:
        out["mcmc"] = mcmc_check(res, steps=mcmc_steps, burn=mcmc_steps // 4)
    if nlive:
        out["dynesty"] = log_evidence_dynesty(res, nlive=nlive)
    out["grid"] = log_evidence_grid(res)
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
    print("== 3 parameters (E, zeta, k_root), 4 s record at 1 kHz: VB (goal < 2 s)", flush=True)
    res, cold, warm = speed(d)
    th, sd = res.theta, res.theta_std
    print(f"   VB {warm:.2f} s ({cold:.2f} s as a fresh process's first run: imports, numba "
          f"cache), {res.problem.n_evals} model runs, F = {res.vb.F:.2f}; E {th[0] / 1e9:.3f} "
          f"+- {sd[0] / 1e9:.3f} GPa (truth 66), zeta {th[1]:.5f} +- {sd[1]:.5f}, k_root "
          f"{th[2]:.3f} +- {sd[2]:.3f} (truth 6)", flush=True)
    print("== small problem, same posterior: (E, k_root), damping fixed, 0.5 s record", flush=True)
    r = small(d, a.mcmc_steps, a.nlive)
    tv, nv, F = r["vb"]
    lg, edge, ng, tg = r["grid"]
    print("   | method | time [s] | model runs | result |")
    print("   | --- | --- | --- | --- |")
    print(f"   | VB | {tv:.2f} | {nv} | F = {F:.3f} |")
    if "mcmc" in r:
        c = r["mcmc"]
        print(f"   | emcee ({c['walkers']} x {c['steps']}) | {c['seconds']:.1f} | "
              f"{c['model_evaluations']} | max abs(mean - VB) = {c['max_mean_dev_sigma']:.3f} "
              f"sigma, std ratio {np.round(c['std_ratio'], 3).tolist()} |")
    if "dynesty" in r:
        lz, lzerr, nz, tz = r["dynesty"]
        print(f"   | dynesty (nlive {a.nlive}, multi-ellipsoid, uniform) | {tz:.1f} | {nz} | "
              f"log Z = {lz:.3f} +- {lzerr:.3f}, F - log Z = {F - lz:.3f} |")
    print(f"   | quadrature (61 x 61, +-7 VB sigma) | {tg:.1f} | {ng} | log Z = {lg:.3f}, "
          f"F - log Z = {F - lg:.3f} (edge/peak {edge:.0f} in log) |", flush=True)


def fde_table(d):
    """Issue 17's three model errors: estimates after calibration against the true model."""
    from calib_truth import SCENARIOS, fde_scenario
    print("== operational estimates after calibration (force FDE 0-200 Hz, NRMSE full band; "
          "60 mm displacement the same)")
    print("   | model error | model | force FDE | force NRMSE | d60 FDE | d60 NRMSE |")
    print("   | --- | --- | --- | --- | --- | --- |")
    for i, name in enumerate(SCENARIOS):
        sub = d / f"fde{i}"
        sub.mkdir()
        r = fde_scenario(name, sub, nominal=True, limit=True)
        keys = ("force_fde", "force_nrmse", "d60_fde", "d60_nrmse")
        for model in ("nominal", "true", "calibrated"):
            print(f"   | {name} | {model} | " + " | ".join(f"{r[model][k]:.4f}" for k in keys)
                  + " |")
        print(f"   | {name} | calibrated / true | "
              + " | ".join(f"{r['calibrated'][k] / r['true'][k]:.3f}" for k in keys) + " |")
        lim = r["limit"]
        print(f"     MMSE limit (truth's full model, fixed lag {lim['delay_samples']} samples): "
              f"force NRMSE {lim['force_nrmse']:.4f}, d60 NRMSE {lim['d60_nrmse']:.4f}; "
              f"calibrated / limit {r['calibrated']['force_nrmse'] / lim['force_nrmse']:.2f}, "
              f"{r['calibrated']['d60_nrmse'] / lim['d60_nrmse']:.2f}")
        print("     posterior: " + ", ".join(f"{n} {v:.4g} +- {r['std'][n]:.2g}"
                                             for n, v in r["theta"].items()), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mcmc-steps", type=int, default=1000)
    ap.add_argument("--nlive", type=int, default=200)
    ap.add_argument("--skip-zones", action="store_true")
    ap.add_argument("--zones", type=int, default=100)
    ap.add_argument("--only-zones", action="store_true")
    ap.add_argument("--fde", action="store_true", help="only the FDE-after-calibration table")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if a.fde:
            fde_table(d)
            return 0
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
