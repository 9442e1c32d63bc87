"""Truth for the hybrid twin's tests and benchmark: the FULL FE model with a hardening
(cubic) spring, integrated by the classical Runge-Kutta method on a grid ``decim`` times finer
than the record -- neither the reduced model nor the estimator's discretisation (matrix
exponential with holds at the record's rate).

The full model is projected on its lowest ``n_modes`` modes (all modes well above the load's
band; the cubic spring acts at a physical DOF)::

    eta'' + c eta' + lam eta = Phi^T (B f(t) - e_s k3 (e_s^T Phi eta)^3)

The force is linear between its samples (``f`` given on a grid ``oversample`` times finer than
the record).
"""

from __future__ import annotations

import numpy as np

from edge.kinds import kind_order
from offline.calibration_runs import sensor_rows
from offline.chain import MIN_STEPS_PER_ROW
from offline.fem.strain import probe_matrix
from offline.limit.modal_damping import modal_damping
from offline.metrics import add_noise
from offline.model import (build_fe_model, load_model_file, output_probe, resolve_dofs,
                           sensor_probe)
from offline.reduction.eigen import modes
from offline.simulate import load_profile


def simulate_cubic(model, force_dofs, spring_dof: int, k3: float, F_fine, dt_fine: float,
                   decim: int, probes, n_modes: int = 6):
    """Responses at ``probes`` of the full ``model`` with a cubic spring.

    Parameters
    ----------
    model : FEModel           constrained full model (M, K, damping_matrix())
    force_dofs : list of int  model DOF of each force
    spring_dof : int          model DOF of the spring (force ``-k3 u^3`` [N], k3 [N/m^3])
    F_fine : (nt, nf)         forces [N] every ``dt_fine`` [s]
    decim : int               record every ``decim``-th fine sample
    probes : list of (probe, order)   a DOF index or an :class:`offline.fem.strain.Probe`
                              (a strain gauge's or stress output's row over the DOFs) and
                              its time-derivative order (0 u / strain, 1 v, 2 a)
    n_modes : int             modes of the full model kept

    Returns
    -------
    (nt_out, len(probes)) responses [SI], ``nt_out = (nt - 1) // decim + 1``.
    """
    md = modes(model.K, model.M, n_modes)
    lam, Phi = np.clip(md.lam, 0.0, None), md.Phi
    c, Ct = modal_damping(Phi, model.damping_matrix())  # Ct: damping coupling the modes

    def damping(v):  # Ct v, or c v mode by mode where the damping is proportional
        return c * v if Ct is None else Ct @ v
    P = Phi[np.asarray(force_dofs, dtype=int)].T        # (m, nf)
    ps = Phi[int(spring_dof)]                           # (m,)
    m = lam.size
    nt = F_fine.shape[0]

    def rhs(eta, v, f):
        u = ps @ eta
        # eta'' = Phi^T B f - Phi_s k3 u^3 - Ct eta' - lam eta  (Ct = diag(c) unless coupled)
        return P @ f - ps * (k3 * u ** 3) - damping(v) - lam * eta

    n_out = (nt - 1) // decim + 1
    eta, v = np.zeros(m), np.zeros(m)
    E, V, Acc = np.zeros((n_out, m)), np.zeros((n_out, m)), np.zeros((n_out, m))
    h = dt_fine
    for k in range(nt):
        if k % decim == 0:
            E[k // decim], V[k // decim] = eta, v
            Acc[k // decim] = rhs(eta, v, F_fine[k])
        if k + 1 == nt:
            break
        f0, f1 = F_fine[k], F_fine[k + 1]
        fm = 0.5 * (f0 + f1)                       # force linear within the fine step
        # classical Runge-Kutta 4 on (eta, v)
        a1 = rhs(eta, v, f0)
        a2 = rhs(eta + 0.5 * h * v, v + 0.5 * h * a1, fm)
        v2 = v + 0.5 * h * a1
        a3 = rhs(eta + 0.5 * h * v2, v + 0.5 * h * a2, fm)
        v3 = v + 0.5 * h * a2
        a4 = rhs(eta + h * v3, v + h * a3, f1)
        v4 = v + h * a3
        eta = eta + h / 6.0 * (v + 2 * v2 + 2 * v3 + v4)
        v = v + h / 6.0 * (a1 + 2 * a2 + 2 * a3 + a4)
    if not (np.all(np.isfinite(E)) and np.all(np.isfinite(V))):
        raise RuntimeError("truth integration diverged (step too large for the spring?)")
    out = np.zeros((n_out, len(probes)))
    R = probe_matrix([p for p, _ in probes], Phi.shape[0]) @ Phi   # (n_probes, m) modal rows
    for j, (_, order) in enumerate(probes):
        out[:, j] = (E, V, Acc)[order] @ R[j]
    return out


def cubic_record(path, spring, k3: float, rms: float, seed: int, duration: float,
                 band=(5.0, 150.0), noise: float = 0.01, oversample: int = 10,
                 n_modes: int | None = None):
    """A force-and-response record of the model file ``path`` with a cubic spring
    ``-k3 u^3`` at ``spring = (select, dof)`` (a ``[[sensors]]``-style selection), under a
    random force of ``rms`` [N] over ``band`` (each force its own realisation, seed ``seed +
    1000 i``, as ``vsense-offline simulate``) from :func:`simulate_cubic` on the FULL model.

    ``n_modes``: modes of the full model kept; default those with ``omega dt_fine <= 1`` (the
    Runge-Kutta step well inside its stability limit 2.8, with room for the spring's
    stiffening), at least 6. Returns ``(t, F (nt, nf), Y (nt, nch) with noise std ``noise``
    relative to each channel, Z (nt, nout) clean outputs)`` at the model's rate; ``Y`` as the
    model file's chain returns it (the ADS1256's conversions by default, :func:`rows`, the
    grid then at least :data:`offline.chain.MIN_STEPS_PER_ROW` steps per row)."""
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    rate = spec.estimator.rate
    oversample = fine_steps(spec, oversample)
    dtf = 1.0 / (rate * oversample)
    if n_modes is None:
        lam = modes(model.K, model.M, 40).lam
        n_modes = max(6, int(np.sum(np.sqrt(np.clip(lam, 0.0, None)) * dtf <= 1.0)))
    nt = int(round(duration * rate)) + 1
    tf = dtf * np.arange((nt - 1) * oversample + 1)
    F = np.column_stack([load_profile("random", tf, band=band, rms=rms * f.scale,
                                      seed=seed + 1000 * i)
                         for i, f in enumerate(spec.forces)])
    dof = lambda s, d: resolve_dofs(model, s, d, str(path))[0]  # noqa: E731
    probes = [(sensor_probe(model, s), kind_order(s.kind)) for s in spec.sensors]
    probes += [(output_probe(model, o), kind_order(o.kind)) for o in spec.outputs]
    chain = spec.chain()
    decim = 1 if not chain.point else oversample
    out = simulate_cubic(model, [dof(f.select, f.dof) for f in spec.forces],
                         dof(*spring), k3, F, dtf, decim, probes, n_modes=n_modes)
    nch = len(spec.sensors)
    rng = np.random.default_rng(10_000 + seed)
    Y, Z = rows(out, nch, oversample // decim, nt, chain, dtf)
    return tf[::oversample], F[::oversample], add_noise(Y, noise, rng), Z


def fine_steps(spec, oversample: int) -> int:
    """Fine steps per row: ``oversample``, at least :data:`offline.chain.MIN_STEPS_PER_ROW`
    where the model file's chain converts (its taps between the fine nodes)."""
    return oversample if spec.chain().point else max(oversample, MIN_STEPS_PER_ROW)


def rows(out, nch: int, steps: int, nt: int, chain, dt_fine: float):
    """``(Y (nt, nch), Z (nt, nout))`` from the responses ``out`` every ``dt_fine = 1 /
    steps`` row (``steps = 1``: at the rows): the sensors as ``chain`` returns them (the ADS1256's
    conversions, as ``vsense-offline simulate``; point samples for ``ideal``), the outputs
    at the rows (the truth of the estimates)."""
    if steps == 1:
        return out[:, :nch], out[:, nch:]
    return sensor_rows(out[:, :nch], dt_fine, steps, nt, chain), out[::steps, nch:]
