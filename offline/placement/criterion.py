"""The estimation criterion of a sensor layout: the predicted normalised RMS error of every
force and output of the model file, from the steady-state covariance of the fixed-lag Kalman
smoother the build designs (docs/placement.md).

Set up once (:func:`placement_model`): FE model, reduction (masters: the sensors already
placed, the forces, the declared masters), the smoother's state-space model with the model
file's force models, noise and lag (:func:`offline.smoother.design_smoother`), one row of
``H`` per candidate (the reduction basis at its DOF, as a virtual output) and its noise
variance. Per layout (:meth:`PlacementModel.nrmse`): one Riccati solution and the fixed-lag
sum, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.acquisition import Chain
from edge.estimator.operator import EstimatorError
from offline._deps import need
from offline.fem.strain import probe_matrix
from offline.load.declared import declared_force_models
from offline.model import EstimatorSpec, build_fe_model, sensor_probe
from offline.placement.chained import ChainedModel
from offline.placement.honest import load_grid, smoother_nrmse
from offline.placement.riccati import riccati
from offline.reduced import design_bundle, reduce_model
from offline.reduction import recover
from offline.smoother import design_smoother, smoother_settings

#: Noise floor of a candidate or sensor declared with ``noise = 0`` (relative std).
NOISE_FLOOR = 1e-4


@dataclass
class _Channel:
    """A channel row for :func:`design_smoother`: ``row`` over the reduced coordinates."""

    name: str
    row: np.ndarray
    kind: str
    weight: float


@dataclass
class PlacementModel:
    """The smoother's model with every candidate as a channel row.

    Attributes
    ----------
    A, Q : (ns, ns)        one step and its process noise (Van Loan, as the build)
    Cq : (nq, ns)          forces then outputs
    Hs : (ns_fixed, ns)    rows of the sensors already placed;  rs : their noise variances
    Hc : (ncand, ns)       rows of the candidates;  rc : their noise variances
    d : (ns,)              open-loop stationary std of each state (Riccati scaling)
    target_std : (nq,)     stationary std of each force and output under the load model
    lag : int              smoother lag [samples] (the estimator's delay)
    targets, candidates, sensors : list of str
    cost : (ncand,)        candidate costs
    """

    A: np.ndarray
    Q: np.ndarray
    Cq: np.ndarray
    Hs: np.ndarray
    rs: np.ndarray
    Hc: np.ndarray
    rc: np.ndarray
    d: np.ndarray
    target_std: np.ndarray
    lag: int
    targets: list
    candidates: list
    sensors: list
    cost: np.ndarray
    rm: object = None      # offline.reduced.ReducedModel (masters, T, FE model)
    cand_dofs: list = None  # FE DOF of each candidate
    force_models: list = None
    dt: float = 1e-3
    cand_rows: np.ndarray = None  # (ncand, n) candidates' rows over the reduced coordinates
    cand_kinds: list = None
    sens_rows: np.ndarray = None  # (nfix, n) the fixed sensors'
    sens_kinds: list = None
    out_rows: np.ndarray = None   # (nout, n) the outputs'
    out_kinds: list = None
    grid: object = None           # offline.placement.honest.LoadGrid: the calibration load
    Qs: tuple = ()                # process noise of each model-error level
    model_errors: tuple = (0.0,)  # the build's levels (offline.smoother.SmootherSettings)
    chained: object = None        # offline.placement.chained.ChainedModel (None: point samples)

    def nrmse(self, layout) -> np.ndarray:
        """Predicted normalised RMS error (nq,) of each target on the build's calibration
        runs (:mod:`offline.placement.honest`): the smoother the build designs for the
        fixed sensors plus the candidates ``layout`` (indices), at each model-error level
        the build scores, the level with the lowest geometric-mean error (as the build's
        choice), run on the full model under the ``[design_load]`` load."""
        return self.evaluate(layout)[0]

    def system(self, layout):
        """The smoother model of ``layout`` (candidate indices, taken in
        ``[[placement.candidates]]`` order, as ``place`` writes them): ``(idx, A, [Q per
        level], H, r, d, Cq, resp)``, its channels through the chain the build gives them
        (:mod:`offline.placement.chained`; ``resp`` (nb, m) their response, None for point
        samples)."""
        idx = np.sort(np.asarray(list(layout), dtype=int))
        H = np.vstack([self.Hs, self.Hc[idx]])
        r = np.concatenate([self.rs, self.rc[idx]])
        A, Qs, d, Cq = self.A, self.Qs or (self.Q,), self.d, self.Cq
        chain = self.chained.chain(idx) if self.chained is not None and H.shape[0] \
            else Chain()
        if chain.point:
            return idx, A, Qs, H, r, d, Cq, None
        A, Qs, H, d = self.chained.system(idx, chain)
        Cq = np.pad(Cq, ((0, 0), (0, A.shape[0] - Cq.shape[1])))
        return idx, A, Qs, H, r, d, Cq, self.chained.response(idx, chain)

    def evaluate(self, layout):
        """``(nrmse (nq,), model_error)`` of :meth:`nrmse`."""
        idx, A, Qs, H, r, d, Cq, resp = self.system(layout)
        if H.shape[0] == 0:
            return np.ones(len(self.targets)), self.model_errors[0]
        Hy = np.concatenate([self.grid.Hs, self.grid.Hc[:, idx]], axis=1)
        if resp is not None:  # each channel through its conversion and sensor
            Hy = Hy * resp[:, :, None]
        best = None
        for me, Q in zip(self.model_errors, Qs):
            P = riccati(A, H, Q, np.diag(r), d)
            e = smoother_nrmse(A, H, np.diag(r), P, Cq, self.lag, Hy, self.grid)
            score = float(np.mean(np.log(np.maximum(e, 1e-300))))
            if best is None or score < best[0]:
                best = (score, e, me)
        return best[1], best[2]

    def stated(self, layout, model_error=None) -> np.ndarray:
        """The smoother's own stated error (nq,) under its force models (what its std says),
        over the targets' stationary std under the same models, at the smoother's lag;
        ``model_error``: one of :attr:`model_errors` (default the first); the chain as in
        :meth:`system`.

        ``P`` from the Riccati equation; ``S = H P H^T + R``; smoothed covariance
        ``P_{k-L|k} = P - sum_{j=0..L} P (Abar^T)^j H^T S^-1 H Abar^j P`` with
        ``Abar = A (I - K H)`` (docs/smoother.md); error = sqrt(diag(Cq P_{k-L|k} Cq^T)) /
        target std.
        """
        _, A, Qs, H, r, d, Cq, _ = self.system(layout)
        var0 = self.target_std ** 2
        if H.shape[0] == 0:
            return np.ones_like(var0)
        me = self.model_errors[0] if model_error is None else model_error
        Q = Qs[self.model_errors.index(me)] if self.Qs else Qs[0]
        P = riccati(A, H, Q, np.diag(r), d)
        S = H @ P @ H.T + np.diag(r)
        Sinv = np.linalg.inv(0.5 * (S + S.T))
        K = P @ H.T @ Sinv
        Abar = A - A @ K @ H
        Z = P @ Cq.T                       # Abar^j P Cq^T
        var = np.einsum("ij,ji->i", Cq, Z)
        for _ in range(self.lag + 1):
            HZ = H @ Z
            var = var - np.einsum("ij,ij->j", HZ, Sinv @ HZ)
            Z = Abar @ Z
        return np.sqrt(np.clip(var / var0, 0.0, 1.0))


def force_models(spec, rate: float) -> list:
    """Each ``[[forces]]`` entry's smoother force model as the build declares it
    (:func:`offline.load.declared.declared_force_models`: its ``model``, else its own
    ``[design_load]`` load times its ``scale``, the default roll-off order)."""
    out = declared_force_models(spec, rate)
    for f, fm in zip(spec.forces, out):
        if fm.kind != "bandpass":
            raise ValueError(f"{f.where}.model.kind: place needs band-pass force models (a "
                             f"random-walk force has no stationary std to normalise by)")
    return out


def _noise_variances(spec, allsig, std):
    """Each sensor's and candidate's noise variance: noise std = noise level x the signal's
    stationary std ``std`` under the calibration load (paper eq. 28, exactly as the build's
    calibration runs and channel weights); ``[placement] noise = "absolute"``: x the largest
    std of its kind and DOF (one floor); a noise given in the channel's unit (``noise_std``)
    is the sensor's own."""
    lev = np.array([max(s.noise, NOISE_FLOOR) for s in allsig])
    ref = std.copy()
    if spec.placement is not None and spec.placement.noise == "absolute":
        groups = [(s.kind, s.dof) for s in allsig]
        for g in set(groups):
            idx = [i for i, x in enumerate(groups) if x == g]
            ref[idx] = ref[idx].max()
    given = np.array([np.nan if s.noise_std is None else s.noise_std for s in allsig])
    with np.errstate(over="ignore", under="ignore"):  # refused by _check_responds
        return np.where(np.isfinite(given), given ** 2, (lev * ref) ** 2)


def placement_model(spec, *, candidates=None, progress: bool = True,
                    n_modes: int | None = None) -> PlacementModel:
    """Set up the criterion of ``spec`` (a validated model file) once.

    ``candidates``: the :class:`offline.model.placement.Candidate` list (default the file's
    ``[[placement.candidates]]``). Raises ``ValueError`` naming the key when the file has no
    forces or no candidates.
    """
    if not spec.forces:
        raise ValueError(f"{spec.where('[[forces]]')}: place needs at least one force")
    if candidates is None:
        candidates = list(spec.placement.candidates) if spec.placement else []
    if not candidates:
        raise ValueError(f"{spec.where('[[placement.candidates]]')}: no candidates to place "
                         "(all of them are [[sensors]] already, or none given)")
    est = spec.estimator if spec.estimator is not None else EstimatorSpec()
    model = build_fe_model(spec, progress=progress)
    rm = reduce_model(spec, model, n_modes=n_modes, n_report=0, progress=progress)
    bundle = design_bundle(rm, est)
    fms = force_models(spec, bundle.rate)
    cdofs = [sensor_probe(model, c, c.where) for c in candidates]  # a DOF or a gauge's row
    T = np.asarray(rm.reduction.T)
    rows = recover(T, cdofs) if not any(hasattr(d, "coef") for d in cdofs) else \
        np.asarray(probe_matrix(cdofs, T.shape[0]) @ T, dtype=np.float64)
    # the sensors already placed (master rows), then the candidates, then one stiff
    # displacement channel at each force DOF: it makes every force observable in this one
    # design (whose A, Q and rows do not depend on the channels); it is not used after
    scale = _force_displacement(bundle, fms)
    fixed = [_Channel(s.name, np.eye(bundle.n)[c.dof], s.kind, 1.0)
             for s, c in zip(spec.sensors, bundle.channels)]
    cand = [_Channel(c.name, r, c.kind, 1.0) for c, r in zip(candidates, rows)]
    anchor = [_Channel(f"_{f.name}", np.eye(bundle.n)[f.dof], "displacement",
                       1.0 / (1e-3 * s) ** 2) for f, s in zip(bundle.forces, scale)]
    sset = smoother_settings(spec, est, bundle.rate)  # the build's smoother (one design path)
    lag = sset.lag
    # point samples here: the continuous model (Ac, Qc) and the rows are shared by every
    # layout; a layout's chain is discretised per layout (offline/placement/chained.py)
    b = bundle.replace(channels=fixed + cand + anchor, chain=Chain())
    try:  # one design per model-error level the build scores: A and Cq alike, Q differs
        designs = [design_smoother(b, fms, lag, me) for me in sset.model_errors]
    except EstimatorError as exc:
        raise EstimatorError(f"{spec.where('[estimator]')}: {exc}") from None
    linalg = need("scipy.linalg")
    design = designs[0]
    A, Q, Cq = design.A, design.Q, design.Cq
    # stationary covariance X = A X A^T + Q (the load model's response: stable A)
    X = linalg.solve_discrete_lyapunov(A, Q)
    X = 0.5 * (X + X.T)
    d = np.sqrt(np.clip(np.diag(X), 0.0, None))
    d = np.maximum(d, 1e-12 * float(np.max(d)))
    nfix, ncand = len(fixed), len(cand)
    H = design.H
    # the calibration runs' load on the full model (offline/placement/honest.py)
    grid = load_grid(spec, model, rm.force_dofs,
                     [(dd, s.kind) for dd, s in zip(rm.chan_dofs, spec.sensors)],
                     [(dd, c.kind) for dd, c in zip(cdofs, candidates)],
                     [(dd, o.kind) for dd, o in zip(rm.out_dofs, spec.outputs)], bundle.dt)
    std = np.sqrt(np.concatenate([grid.var_s, grid.var_c]))
    allsig = list(spec.sensors) + list(candidates)
    r = _noise_variances(spec, allsig, std)
    tstd = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Cq, X, Cq), 0.0, None))
    names = [f.name for f in spec.forces] + [o.name for o in spec.outputs]
    _check_responds(spec, allsig, std, r)
    return PlacementModel(A=A, Q=Q, Cq=Cq, Hs=H[:nfix], rs=r[:nfix], Hc=H[nfix:nfix + ncand],
                          rc=r[nfix:], d=d, target_std=tstd, lag=int(lag), targets=names,
                          candidates=[c.name for c in candidates],
                          sensors=[s.name for s in spec.sensors],
                          cost=np.array([c.cost for c in candidates], float), rm=rm,
                          cand_dofs=cdofs, force_models=fms, dt=bundle.dt, cand_rows=rows,
                          cand_kinds=[c.kind for c in candidates],
                          sens_rows=rm.channel_rows(), sens_kinds=[s.kind for s in spec.sensors],
                          out_rows=rm.output_rows(), out_kinds=[o.kind for o in spec.outputs],
                          grid=grid, Qs=tuple(dd.Q for dd in designs),
                          model_errors=tuple(sset.model_errors),
                          chained=ChainedModel(
                              Ac=design.Ac, Qcs=tuple(dd.Qc for dd in designs),
                              C=H[:nfix + ncand], dt=bundle.dt, n2=2 * bundle.n,
                              proportional=design.proportional, X=X, spec=spec,
                              entries=allsig, nfix=nfix,
                              freqs=np.fft.rfftfreq(grid.n, bundle.dt)))


def _check_responds(spec, allsig, std, r) -> None:
    """A sensor or candidate on a DOF the forces barely move (a clamped DOF: its stationary
    std is round-off, 1e-18 of its kind's largest) would be a perfect measurement of nothing
    under a relative noise (variance ~1e-36); a noise whose variance is not a finite
    positive number (``noise_std`` 1e300 or 1e-300) is no noise model: a ValueError naming
    it."""
    kinds = [s.kind for s in allsig]
    for i, s in enumerate(allsig):
        top = max(std[j] for j in range(len(allsig)) if kinds[j] == s.kind)
        if not (np.isfinite(r[i]) and r[i] > 0) and std[i] > 1e-6 * top:
            given = f"noise_std {s.noise_std:g}" if s.noise_std is not None else \
                f"noise {s.noise:g} x its std {std[i]:.3g}"
            raise ValueError(f"{s.where}: {s.name}: its noise variance ({given}, squared) is "
                             f"{r[i]:.3g}, not a finite positive number")
        if not np.isfinite(r[i]) or r[i] <= 0 or std[i] <= 1e-6 * top:
            raise ValueError(f"{spec.where('[[placement.candidates]]')}: {s.name} does not "
                             f"respond to the forces (stationary std {std[i]:.3g}, "
                             f"{std[i] / top if top > 0 else 0:.2g} of the largest "
                             f"{s.kind} candidate's): remove it")


def _force_displacement(bundle, fms) -> np.ndarray:
    """Displacement amplitude [m] at each force DOF under its own force at the band's centre:
    ``|(K - w^2 M + j w C)^-1|_ff rms`` (scale of the auxiliary channels)."""
    out = []
    for f, fm in zip(bundle.forces, fms):
        w = 2 * np.pi * float(np.sqrt(fm.band[0] * fm.band[1]))
        Z = bundle.K - w ** 2 * bundle.M + 1j * w * bundle.C
        e = np.zeros(bundle.n)
        e[f.dof] = 1.0
        out.append(abs(np.linalg.solve(Z, e)[f.dof]) * fm.rms + 1e-300)
    return np.array(out)

