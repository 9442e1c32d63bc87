"""A zoo of realistic loads: accuracy and 1-sigma coverage with and without a record.

For each load (a roll-off of order 1, 2 or 4 against the declared band, a pink load, a load
carrying a source resonance, a load 50x below its declared size) the user declares what
they know (``[design_load]`` random 5-160 Hz, 1 N, 1 % noise); the truth is the FULL model
integrated by sparse Newmark on every DOF (``offline.simulate.simulate_sparse``, 10 steps
per sample: not the estimator's reduced model nor its exact discretisation), converted by
the model file's chain (the strip declares none: the ADS1256 at 1,000 SPS, each conversion
the sinc5 + averager over its window; ``--chain ideal``: point samples). Two bundles:
``build`` with defaults, and ``build --record RUN.csv`` with a separate 20 s record of the
same operation (other seed). Each runs on an 8 s test record (third seed); reported per
target: normalised RMS error ``RMS(est - truth) / std(truth)`` (full band), FDE 0-200 Hz
(paper eq. 33), the ratio to the MMSE limit at the estimator's delay computed with the TRUE
spectra and the bundle's chain (:func:`offline.limit.model.model_limit`), and the fraction
of samples within the stated 1-sigma band (68 % for a right model).

    python benchmarks/load_zoo.py [--quick] [--cases NAME,...] [--chain ideal] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.csvio import write_table  # noqa: E402
from edge.estimator import Estimator  # noqa: E402
from offline.build import build  # noqa: E402
from offline.limit.model import model_limit  # noqa: E402
from offline.metrics import fde  # noqa: E402
from offline.model import build_fe_model, load_model_file  # noqa: E402
from offline.load.zoo import (RECEIVER, STRIP, STRIP_CHIP, ZOO as CASES,  # noqa: E402
                              record, source_load)



def score(bundle, Y, F, Z, lim, band=(0.0, 200.0)):
    """Per target: nrmse, fde, ratio to the limit, 1-sigma coverage (after 1 s)."""
    est = Estimator(bundle)
    Fe, Ze, _, S = est.run_std(Y)  # S: each row's stated std (it follows the load level)
    d = est.delay
    s0 = int(round(1.0 / bundle.dt))
    T = np.hstack([F, Z])[s0:Y.shape[0] - d]
    E = np.hstack([Fe, Ze])[s0 + d:]
    std = None if S is None else S[s0 + d:]
    lim_all = np.concatenate(lim)
    out = {}
    names = [f.name for f in bundle.forces] + [o.name for o in bundle.outputs]
    for i, n in enumerate(names):
        e = E[:, i] - T[:, i]
        nr = float(np.sqrt(np.mean(e ** 2)) / np.std(T[:, i]))
        out[n] = {"nrmse": nr, "limit": float(lim_all[i]), "ratio": nr / float(lim_all[i]),
                  "fde": float(fde(E[:, i], T[:, i], bundle.dt, band=band).value),
                  "coverage": (float(np.mean(np.abs(e) <= std[:, i])) if std is not None
                               else None)}
    return out


def run_case(name, lm, path, spec, model, quick, orders=(), with_record=True, noise=0.01,
             record_seed=11):
    """Bundles: the defaults ("declared"), one per Butterworth order given in the model file
    ("order k"), and with a record (drawn with ``record_seed``); each scored on the same test
    record."""
    d = Path(tempfile.mkdtemp(prefix="zoo-"))
    rec_s = 10.0 if quick else 20.0
    Yr, _, _ = record(spec, model, lm, rec_s, record_seed, noise=noise)
    write_table(d / "run.csv", np.arange(Yr.shape[0]) / spec.estimator.rate, Yr,
                [s.name for s in spec.sensors])
    Y, F, Z = record(spec, model, lm, 6.0 if quick else 8.0, 23, noise=noise)
    res = {}
    variants = [("declared", path, None)]
    for k in orders:
        pk = d / f"order{k}.toml"
        pk.write_text(path.read_text().replace('[[forces]]\nname = "F110"',
                                               f'[[forces]]\nname = "F110"\nmodel = '
                                               f'{{ order = {k} }}'))
        variants.append((f"order {k}", pk, None))
    if with_record:
        variants.append(("record", path, [str(d / "run.csv")]))
    for label, p, recs in variants:
        t0 = time.perf_counter()
        built = build(p, progress=False, maps=False, records=recs)
        b = built.bundle
        lim_all = model_limit(spec, model, loads=lm, noise=noise,
                              delays=(0.0, (b.window - 1) * b.dt),
                              exact=False, chain=b.chain)
        lim = lim_all.at_delay((b.window - 1) * b.dt + 1e-9)
        res[label] = {"score": score(b, Y, F, Z, lim), "build_s": time.perf_counter() - t0,
                      "method": b.method, "learn_s": built.timings.get("load model")}
    return res


def fmt(name, res) -> str:
    lines = []
    for label, r in res.items():
        for n, s in r["score"].items():
            cov = "-" if s["coverage"] is None else f"{100 * s['coverage']:.0f} %"
            lines.append(f"{name:<11} {label:<9} {n:<6} {s['nrmse']:>8.4f} {s['fde']:>8.4f} "
                         f"{s['limit']:>8.4f} {s['ratio']:>7.2f} {cov:>9}  {r['method']}, "
                         f"build {r['build_s']:.0f} s"
                         + ("" if r.get("learn_s") is None else
                            f" (load model {r['learn_s']:.0f} s)"))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 s records, 6 s tests")
    ap.add_argument("--cases", default=",".join(CASES) + ",receiver",
                    help="comma-separated case names (the zoo's, and 'receiver': two forces "
                         "and two moments of a source at a free-free receiver's interface)")
    ap.add_argument("--json", default=None, help="write the figures as JSON")
    ap.add_argument("--orders", default="", help="also bundles whose [[forces]] model gives "
                    "these Butterworth orders, comma-separated (the prior's roll-off)")
    ap.add_argument("--no-record", action="store_true", help="skip the bundle with --record")
    ap.add_argument("--chain", choices=("model", "ideal"), default="model",
                    help="the strip's measurement chain: 'model' (default), no [acquisition], "
                         "so the ADS1256 at 1,000 SPS in the bundle and the records; 'ideal', "
                         "point samples (the records before the zoo went through the chip)")
    ap.add_argument("--record-seed", type=int, default=11,
                    help="seed of the record the load is learned from (the test record's is 23)")
    a = ap.parse_args(argv)
    d = Path(tempfile.mkdtemp(prefix="zoo-model-"))
    path = d / "strip.toml"
    path.write_text(STRIP_CHIP if a.chain == "model" else STRIP)
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    print("case        bundle    target    nrmse  FDE0-200    limit   ratio  1-sigma")
    out = {}
    orders = [int(k) for k in a.orders.split(",") if k]
    for name in a.cases.split(","):
        if name == "receiver":
            rp = d / "receiver.toml"
            rp.write_text(RECEIVER)
            rs = load_model_file(rp)
            out[name] = run_case(name, source_load(), rp, rs, build_fe_model(rs, progress=False),
                                 a.quick, (), not a.no_record, noise=0.1,
                                 record_seed=a.record_seed)
        else:
            out[name] = run_case(name, CASES[name], path, spec, model, a.quick, orders,
                                 not a.no_record, record_seed=a.record_seed)
        print(fmt(name, out[name]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
