"""The measurement chain declared: accuracy through the ADS1256 and a generic DAQ against
point samples, on structures written from the docs, through the public command line.

Per structure and chain: the model file with that ``[acquisition]`` (``ideal`` point samples,
``ads1256`` in continuous mode or multiplexer cycling, or a ``daq`` FIR of cut-off 0.3 x the
row rate and 2 ms group delay, all channels at once), a record from ``vsense-offline
simulate`` (default ``--chain model``: the full FE model by exact modal integration on a grid
of 32 steps per row, converted as the file declares, random 2-100 Hz, 1 s warm-up so the
record starts moving; the file's ``[design_load]`` band is set to it and every sensor
declares 1 % noise, so that every chain's bundle declares what its record holds; each record
gets that noise as a fixed std per sensor, the one the point-sample bundle was designed with,
its ``noise_std``: ``simulate --noise 0.01`` would scale it with the record's own std, and a
10 s record of the README beam's tip reads 1.65x the stationary std on seed 3, so its noise
was 1.65x the declared, the load level tracker rose to 1.78x and the build's limit did not
hold for that record), ``vsense-offline build`` (no record), ``vsense-edge replay``, ``vsense-offline score``. Printed per target: the normalised RMS error (full band) and the ratio of its RMS
error to the same estimator's on point samples (same load, same noise seed), the ratio to
the accuracy limit at the estimator's delay (the build's, computed with the chain, times the
target's stationary std: the limit's normaliser), the 1-sigma coverage; and the point-sample
bundle replayed on the converted record (a chain left undeclared), and whether replay's
model check said "measurement chain" (the wrong-chain warning). Each force declares
``model = { order = 8 }`` (``--order``): the records' band-limited load has no skirts above
the band, and the default order 2 declares skirts that an accelerometer sampled at the row
rate sees aliased (2x the limit on point samples already, the beam with a tip
accelerometer); ``--order 0`` keeps the default.

    python benchmarks/chain.py [--cases beam,beam2,plate,frame] [--seconds 10] [--order 8]
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from edge.hw.ads1256_spec import row_rates

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ACCEL = """
[[sensors]]
name = "a_tip"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
"""
#: name -> (model file, extra text, rate, ADS1256 (drate, mode) giving that rate)
CASES = {
    "beam": (ROOT / "examples" / "my_beam.toml", "", 1000.0, (1000.0, "continuous")),
    "beam2": (ROOT / "examples" / "my_beam.toml", ACCEL, 1082.5, (3750.0, "cycle")),
    "plate": (ROOT / "benchmarks" / "load_user" / "plate.toml", "", None, (7500.0, "cycle")),
    "frame": (ROOT / "benchmarks" / "load_user" / "frame.toml", "", None, (2000.0, "cycle")),
}


def _model(base: Path, extra: str, rate: float, chain: str, ads, order: int = 8) -> str:
    text = base.read_text()
    m = re.search(r"^rate = ([0-9.e+-]+)", text, re.M)
    text = text[:m.start(1)] + repr(float(rate)) + text[m.end(1):]
    text += extra
    # declare what the records hold (the same for every chain): the load 2-100 Hz, 1 % noise
    text = re.sub(r"band = \[[^]]*\]", "band = [2.0, 100.0]", text)
    text = re.sub(r"^noise(_std)? = .*$", "noise = 0.01", text, flags=re.M)
    if order:  # each force's declared shape: a Butterworth band-pass of this order
        text = re.sub(r"^(\[\[forces\]\]\nname = .*)$", rf"\1\nmodel = {{ order = {order} }}",
                      text, flags=re.M)
    if chain == "ideal":
        return text + '\n[acquisition]\nconverter = "ideal"\n'
    if chain == "ads1256":
        return text + (f'\n[acquisition]\nconverter = "ads1256"\ndrate = {ads[0]!r}\n'
                       f'mode = "{ads[1]}"\n')
    return text + (f'\n[acquisition]\nconverter = "daq"\ncutoff = {0.3 * rate!r}\n'
                   f'group_delay = 2.0e-3\n')


def _fixed_noise(text: str, bundle: Path) -> str:
    """The model file with each sensor's relative ``noise`` replaced by ``noise_std``, the
    absolute std the ``bundle`` was designed with (``1 / sqrt(channel_weight)``), so that
    ``simulate`` adds the sensor's fixed noise whatever the record's own std."""
    from edge.bundle import Bundle

    std = {c.name: c.weight ** -0.5 for c in Bundle.load(bundle).channels}
    parts = text.split("[[sensors]]")
    for i in range(1, len(parts)):
        name = re.search(r'^name = "([^"]+)"', parts[i], re.M).group(1)
        parts[i] = re.sub(r"^noise = .*$", f"noise_std = {std[name]!r}", parts[i], count=1,
                          flags=re.M)
    return "[[sensors]]".join(parts)


def _run(*args, err: bool = False) -> str:
    """stdout of the command (``err``: with its stderr, where replay's warnings go)."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{' '.join(map(str, args))} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout + (r.stderr if err else "")


def _score(d: Path, est: str, truth: str) -> dict:
    """Per target ``(nrmse, RMS error, 1-sigma coverage)`` of ``vsense-offline score``."""
    s = json.loads(_run(BIN / "vsense-offline", "score", d / est, d / truth, "--json"))
    return {c["name"]: (c["nrmse"], c["rms"], c["coverage"]) for c in s["rows"]}


def _limits(build_out: str, bundle: Path) -> dict:
    """Per target the limit's RMS error at the estimator's delay: the build's ratio line's
    normalised limit times the stationary std of the target under the declared load (the
    limit's own normaliser, ``meta["limit"]`` force_std/output_std), so that a short
    record's own std (the 8 Hz mode of a 10 s record) does not move the ratio."""
    from edge.bundle import Bundle

    line = next((x for x in build_out.splitlines() if "ratio to the accuracy limit" in x), "")
    lim = Bundle.load(bundle).meta["limit"]
    std = dict(zip(lim["force_names"] + lim["output_names"],
                   list(lim["force_std"]) + list(lim["output_std"])))
    return {m.group(1): float(m.group(3)) * std[m.group(1)] for m in
            re.finditer(r"(\w+) [0-9.]+x \(([0-9.e+-]+) / ([0-9.e+-]+)\)", line)}


def run_case(name: str, seconds: float, d: Path, order: int = 8) -> list:
    base, extra, rate, ads = CASES[name]
    if rate is None:
        n = base.read_text().count("[[sensors]]") + extra.count("[[sensors]]")
        rate = row_rates(n, ads[1])[ads[0]]
    rows, res = [], {}
    for chain in ("ideal", "ads1256", "daq"):
        m = d / f"{name}_{chain}.toml"
        m.write_text(_model(base, extra, rate, chain, ads, order))
        out = _run(BIN / "vsense-offline", "build", m, "-o", d / f"{chain}.npz", "--quiet")
        sim = d / f"{name}_{chain}_sim.toml"  # the point-sample bundle's noise, fixed
        sim.write_text(_fixed_noise(m.read_text(), d / "ideal.npz"))
        _run(BIN / "vsense-offline", "simulate", sim, "--load", "random", "--band", "2", "100",
             "--duration", seconds, "--warmup", "1", "--seed", "3", "-o", d / chain, "--quiet")
        _run(BIN / "vsense-edge", "replay", d / f"{chain}_measurement.csv", "--bundle",
             d / f"{chain}.npz", "-o", d / f"{chain}_est.csv")
        res[chain] = (_score(d, f"{chain}_est.csv", f"{chain}_truth.csv"),
                      _limits(out, d / f"{chain}.npz"), None)
        if chain != "ideal":  # the point-sample bundle on this chain's record
            said = _run(BIN / "vsense-edge", "replay", d / f"{chain}_measurement.csv",
                        "--bundle", d / "ideal.npz", "-o", d / f"{chain}_wrong.csv", err=True)
            res[chain + "/wrong"] = (_score(d, f"{chain}_wrong.csv", f"{chain}_truth.csv"),
                                     {}, "measurement chain" in said)
    ideal = res["ideal"][0]
    for chain, (sc, lim, warned) in res.items():
        for t, (e, rms, cov) in sc.items():
            rows.append([name, chain, t, f"{e:.4g}", f"{rms / ideal[t][1]:.3f}",
                         f"{rms / lim[t]:.3f}" if t in lim else "-", f"{100 * cov:.1f}",
                         "-" if warned is None else ("yes" if warned else "no")])
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--order", type=int, default=8,
                    help="each force's declared model = { order = K } (0: the default, order "
                         "2, whose skirts above the band the records do not have)")
    a = ap.parse_args(argv)
    w = csv.writer(sys.stdout, delimiter="\t")
    w.writerow(["case", "chain", "target", "nrmse", "x point samples", "x limit",
                "1-sigma %", "chain warning"])
    for name in a.cases.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            for r in run_case(name, a.seconds, Path(tmp), a.order):
                w.writerow(r)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
