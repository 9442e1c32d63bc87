"""What a load model costs: the Wiener estimate designed with one load model, scored on another.

For the two interface receivers (``receiver``: the load zoo's, :data:`offline.load.zoo.RECEIVER`
under :func:`offline.load.zoo.source_load`; ``interface``: ``benchmarks/load_user/
interface.toml`` under :func:`offline.load.zoo.interface_load`), on the FULL model's
transfer functions (80 modes + residual flexibility), the alias images folded
(:func:`offline.limit.aliases.image_stack`), non-causal, per bin::

    W = T P_d G^H (G P_d G^H + R_d)^-1                  (designed with P_d, R_d)
    E = (T - W G) P (T - W G)^H + W R W^H              (scored on the true P, R)

printed as the ratio ``sqrt(E / E_limit)`` per force and output, for ``P_d``: the
declaration (``[design_load]`` and ``scale``, the second-order default roll-off, its relative
noise), and each load's TRUE spectrum without the coherence between the loads. The true
``P_d`` gives 1 (the MMSE limit). The noise: relative to each channel's stationary std
under the true load (the benchmarks' records).

    python benchmarks/limit_mismatch.py [--cases receiver,interface]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.kinds import kind_order  # noqa: E402
from offline.limit.aliases import image_stack  # noqa: E402
from offline.limit.model import noise_std  # noqa: E402
from offline.limit.transfer import modal_model  # noqa: E402
from offline.limit.wiener import half_weights, noise_matrix  # noqa: E402
from offline.load.declared import declared_load_model  # noqa: E402
from offline.load.zoo import RECEIVER, interface_load, source_load  # noqa: E402
from offline.model import (build_fe_model, load_model_file, output_probe,  # noqa: E402
                           resolve_dofs, sensor_probe)


def _ct(X):
    return np.conj(np.transpose(X, (0, 2, 1)))


def mismatched(G, nch, P_d, R_d, P, R, w):
    """(nq,) error variance of the Wiener estimate designed with ``P_d``, ``R_d`` on ``P``,
    ``R``, and the targets' variance."""
    H, T = G[:, :nch], G[:, nch:]
    W = T @ P_d @ _ct(H) @ np.linalg.inv(H @ P_d @ _ct(H) + R_d)
    A = T - W @ H
    E = A @ P @ _ct(A) + W @ R @ _ct(W)
    return w @ np.real(np.einsum("kii->ki", E)), w @ np.real(np.einsum("kii->ki", T @ P @ _ct(T)))


def case(name: str, n: int = 8192) -> None:
    if name == "receiver":
        path = Path(tempfile.mkdtemp()) / "receiver.toml"
        path.write_text(RECEIVER)
        true, rel = source_load(), 0.1
    else:
        path, true, rel = ROOT / "benchmarks" / "load_user" / "interface.toml", interface_load(), 0.05
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    dt = 1.0 / spec.estimator.rate
    probes = ([sensor_probe(model, s, s.name) for s in spec.sensors]
              + [output_probe(model, o) for o in spec.outputs])
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    kinds = [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind) for o in spec.outputs]
    nch, chain = len(spec.sensors), spec.chain()
    mm = modal_model(model, fd, probes, n_modes=80)
    G, P = image_stack(mm, kinds, nch, true, dt, n, chain)
    images = (P.shape[1] // len(spec.forces) - 1) // 2
    w, nb = half_weights(n), G.shape[0]
    R = noise_matrix(noise_std(spec, mm, dt, true, rel, n) ** 2, nb, n)
    e0, v = mismatched(G, nch, P, R, P, R, w)
    names = [f.name for f in spec.forces] + [o.name for o in spec.outputs]
    print(f"{name} ({images} image pairs): " + ", ".join(
        f"{k} {np.sqrt(e / s):.4f}" for k, e, s in zip(names, e0, v)) + " (the limit, non-causal)")
    dec = declared_load_model(spec, spec.estimator.rate)
    _, Pd = image_stack(mm, kinds, nch, dec, dt, n, chain, images=images)
    Rd = noise_matrix(noise_std(spec, mm, dt, None, rel, n) ** 2, nb, n)
    diag = np.zeros_like(P)
    i = np.arange(P.shape[1])
    diag[:, i, i] = P[:, i, i]
    for label, Pd_, Rd_ in (("declared", Pd, Rd), ("true spectra, no coherence", diag, R)):
        e, _ = mismatched(G, nch, Pd_, Rd_, P, R, w)
        print(f"  {label:<28}" + ", ".join(f"{k} {np.sqrt(a / b):.2f}x"
                                           for k, a, b in zip(names, e, e0)), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="receiver,interface")
    for name in ap.parse_args(argv).cases.split(","):
        case(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
