"""Step 2 of the offline path: the reduced model of a model file.

``model file -> FE model -> reduced model -> calibration -> estimator design -> maps -> bundle``.
:func:`reduce_model` is the one place that chooses the master DOFs and reduces; the build
(:mod:`offline.build`), the inverse maps (:mod:`offline.inverse.fromfile`), the calibration
setup and ``simulate --reduced`` all take its :class:`ReducedModel`, so one build reduces once.
:func:`design_bundle` makes the estimator's bundle of it, before calibration.

Reduced coordinates are ``[u_m (masters: sensors, forces, declared masters, in file order,
each DOF once), q_s (slave modal coordinates)]`` (paper eq. 8-10).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge import __version__
from edge.bundle import Bundle, IdentifiedForce, SensorChannel, VirtualOutput
from edge.kinds import AUTO_REDUCTION_BASE, DEFAULT_REDUCTION_METHOD as DEFAULT_METHOD
from edge.kinds import DEFAULT_REDUCTION_MODES as DEFAULT_MODES
from offline.fem.femodel import FEModel
from offline.model.checks import eigen_error_warning, mechanism_warning
from offline.fem.strain import probe_matrix
from offline.model import (EstimatorSpec, ModelFileError, ModelSpec, build_fe_model, output_probe,
                           resolve_dofs, sensor_probe)
from offline.reduction import Reduction, recover, reduce
from offline.gauge_basis import gauge_basis, gauge_master

#: Eigenvalue-report length when a model file has no ``[reduction]`` table (the method and
#: number of modes then are edge.kinds' defaults).
DEFAULT_REPORT = 30


def master_dofs(spec: ModelSpec, model: FEModel):
    """Ordered unique master DOFs: channels first, then forces, then declared masters.

    Returns
    -------
    masters : ndarray of int64, shape (nm,)
        Indices into ``model``'s DOFs.
    chan, force : list of int
        DOF index of each ``[[sensors]]`` / ``[[forces]]`` entry (file order; may repeat); a
        strain gauge's is a :class:`offline.fem.strain.Probe` whose value is a DOF of its row
        that no other signal holds (:func:`offline.gauge_basis.gauge_master`).
    """
    chan = [sensor_probe(model, s) for s in spec.sensors]
    frc = [resolve_dofs(model, f.select, f.dof, f.where or f"[[forces]] {f.name}")[0]
           for f in spec.forces]
    extra = []
    if spec.reduction is not None:
        for m in spec.reduction.masters:
            extra += resolve_dofs(model, m.select, m.dofs, m.where or "[[reduction.masters]]")
    taken = {int(d) for d in chan + frc + extra if not hasattr(d, "coef")}
    for i, (s, d) in enumerate(zip(spec.sensors, chan)):
        if hasattr(d, "coef"):
            chan[i] = gauge_master(d, taken, s.where or f"[[sensors]] {s.name}")
            taken.add(int(chan[i]))
    order = list(dict.fromkeys([int(d) for d in chan] + frc + extra))
    return np.array(order, dtype=np.int64), chan, frc


def unit_rows(masters, dofs, n: int) -> np.ndarray:
    """Rows picking master DOFs out of the reduced coordinates.

    Row ``j`` is 1 at the position of ``dofs[j]`` in ``masters`` (two entries on one DOF get
    the same row), so ``rows @ u_hat`` are those DOFs' displacements.

    Parameters
    ----------
    masters : sequence of int, (nm,)
    dofs : sequence of int, (k,)
        Model DOF indices, each one of ``masters``.
    n : int
        Number of reduced coordinates.

    Returns
    -------
    ndarray, shape (k, n)
    """
    pos = {int(d): i for i, d in enumerate(masters)}
    rows = np.zeros((len(dofs), n))
    rows[np.arange(len(dofs)), [pos[int(d)] for d in dofs]] = 1.0
    return rows


def reduced_damping(model: FEModel, red: Reduction) -> np.ndarray:
    """``C = a M_hat + b K_hat`` (Rayleigh, paper eq. 7) ``+ T^T C_explicit T``, symmetric."""
    C = np.zeros_like(red.M)
    if model.rayleigh is not None:
        a, b = model.rayleigh
        C = a * red.M + b * red.K
    if model.C is not None:
        C = C + red.T.T @ (model.C @ red.T)
    return 0.5 * (C + C.T)


@dataclass
class ReducedModel:
    """A model file's FE model, its reduction and where its signals sit.

    Attributes
    ----------
    spec : ModelSpec
    model : FEModel                 constrained full model (N DOFs)
    reduction : Reduction           ``M, K (n, n)``, ``T (N, n)``
    C : ndarray, shape (n, n)       reduced damping (:func:`reduced_damping`)
    masters : ndarray (nm,)         model DOF of each master coordinate
    chan_dofs, force_dofs, out_dofs : list of int   model DOF of each sensor, force, output
    """

    spec: ModelSpec
    model: FEModel
    reduction: Reduction
    C: np.ndarray
    masters: np.ndarray
    chan_dofs: list
    force_dofs: list
    out_dofs: list

    @property
    def n(self) -> int:
        return int(self.reduction.M.shape[0])

    def position(self, dof: int) -> int:
        """Reduced coordinate of a master DOF."""
        return int(np.flatnonzero(self.masters == int(dof))[0])

    def channel_rows(self) -> np.ndarray:
        """(nch, n): sensor displacements from the reduced coordinates (a strain gauge's
        row is ``s @ T``, a unit row in the gauge basis of :mod:`offline.gauge_basis`)."""
        if not any(hasattr(d, "coef") for d in self.chan_dofs):
            return unit_rows(self.masters, self.chan_dofs, self.n)
        T = np.asarray(self.reduction.T)
        return np.asarray(probe_matrix(self.chan_dofs, T.shape[0]) @ T, dtype=np.float64)

    def force_matrix(self) -> np.ndarray:
        """(n, nf): reduced load of unit forces."""
        return unit_rows(self.masters, self.force_dofs, self.n).T

    def output_rows(self) -> np.ndarray:
        """(nout, n): output displacements ``T[out_dofs]`` (any DOF, not only masters); a
        strain/stress output's row ``s`` over the DOFs (offline.fem.strain) gives ``s @ T``."""
        if not self.out_dofs:
            return np.zeros((0, self.n))
        if not any(hasattr(d, "coef") for d in self.out_dofs):
            return recover(self.reduction.T, self.out_dofs)
        T = np.asarray(self.reduction.T)
        return np.asarray(probe_matrix(self.out_dofs, T.shape[0]) @ T, dtype=np.float64)


def reduce_model(spec: ModelSpec, model: FEModel | None = None, *, n_modes: int | None = None,
                 n_report: int | None = None, progress: bool = True,
                 method: str | None = None) -> ReducedModel:
    """Masters from the signals, then GMR+/CB/Guyan as ``[reduction]`` says.

    Parameters
    ----------
    spec : ModelSpec
    model : FEModel, optional
        The constrained model of ``spec`` (built with :func:`build_fe_model` when None).
    n_modes : int, optional
        Overrides ``[reduction] modes``.
    n_report : int, optional
        Overrides ``[reduction] n_report`` (0: no full-model eigenvalue report).
    progress : bool
        Show progress bars.
    method : str, optional
        Overrides ``[reduction] method``; ``"auto"`` reduces with GMR+ here (the build's
        choice, :mod:`offline.reduction_choice`, may then reduce again with ``"cb+r"``).
    """
    if model is None:
        model = build_fe_model(spec, progress=progress)
    rs = spec.reduction
    masters, chan, frc = master_dofs(spec, model)
    modes = int(n_modes if n_modes is not None else (rs.modes if rs else DEFAULT_MODES))
    n_rep = n_report if n_report is not None else (rs.n_report if rs else DEFAULT_REPORT)
    n_slave = model.n_dofs - len(set(int(m) for m in masters))
    if n_modes is None and modes > n_slave:  # a small (imported) model and the default 50
        given = "modes" in (spec.raw.get("reduction") or {})
        raise ModelFileError(
            f"{spec.where('[reduction].modes')}: {modes} modes{'' if given else ' (the default)'}"
            f" but the model has only {n_slave} slave DOFs ({model.n_dofs} free DOFs, "
            f"{model.n_dofs - n_slave} masters); set modes to at most {n_slave}")
    method = method or (rs.method if rs else DEFAULT_METHOD)
    red = reduce(model, masters, n_modes=modes, n_report=n_rep, progress=progress,
                 method=AUTO_REDUCTION_BASE if method == "auto" else method)
    red = gauge_basis(red, chan, [s.where or f"[[sensors]] {s.name}" for s in spec.sensors])
    outs = [output_probe(model, o) for o in spec.outputs]
    f_band = (spec.estimator.rate if spec.estimator else 1000.0) / 2
    red.report.warnings = [w for w in (mechanism_warning(spec, red.report.freqs_full),
                                       eigen_error_warning(red.report, f_band, spec)) if w]
    return ReducedModel(spec, model, red, reduced_damping(model, red), masters, chan, frc, outs)


def design_bundle(rm: ReducedModel, est_spec: EstimatorSpec, window=None) -> Bundle:
    """The estimator's bundle before calibration: reduced matrices, signals, Newmark settings.

    Channel weights are 1 and ``alpha`` 0 until the calibration runs choose them; ``window``
    (int or "auto", default ``[estimator] window``) gives ``L`` (1 for "auto").
    """
    spec, model, red = rm.spec, rm.model, rm.reduction
    table = model.dof_table()
    channels = [SensorChannel(name=s.name, dof=rm.position(d), kind=s.kind, unit=s.unit,
                              weight=1.0, node=table[d][0], dof_name=table[d][1])
                for s, d in zip(spec.sensors, rm.chan_dofs)]
    forces = [IdentifiedForce(name=f.name, dof=rm.position(d), node=table[d][0],
                              dof_name=table[d][1], scale=float(f.scale))
              for f, d in zip(spec.forces, rm.force_dofs)]
    outputs = [VirtualOutput(name=o.name, row=row, kind=o.kind, unit=o.unit, node=table[d][0],
                             dof_name=table[d][1])
               for o, d, row in zip(spec.outputs, rm.out_dofs, rm.output_rows())]
    rule = window if window is not None else est_spec.window
    meta = {
        "name": spec.name, "model_file": str(Path(spec.path).name),
        "reduction": {"method": red.method, "masters": len(rm.masters), "modes": red.n_modes,
                      "full_dofs": int(model.n_dofs)},
        "vsense_version": __version__,
    }
    return Bundle(M=red.M, C=rm.C, K=red.K, dt=1.0 / est_spec.rate, channels=channels,
                  forces=forces, outputs=outputs, alpha=0.0, beta=est_spec.beta,
                  gamma=est_spec.gamma, window=1 if rule == "auto" else int(rule),
                  discretization=est_spec.discretization, regularization=est_spec.regularization,
                  meta=meta, chain=spec.chain(),
                  report={"freqs_full": red.report.freqs_full,
                          "freqs_reduced": red.report.freqs_reduced,
                          "eig_error": red.report.eig_error})
