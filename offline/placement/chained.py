"""The measurement chain in placement's criterion: each layout's smoother is designed with the
chain the build gives the model file ``place`` writes for it (docs/placement.md "The
measurement chain").

The chain of a layout is ``ModelSpec.chain()`` of the model file whose ``[[sensors]]`` are
the sensors already placed followed by the layout's candidates in ``[[placement.candidates]]``
order (the order ``place`` writes them in): the declared ``[acquisition]`` resolved by the
model parser for that many channels (its default data rate, mode and cycling instants), or
without one the
ADS1256 at the data rate that gives ``[estimator] rate`` rows/s with that many channels (one:
continuous, several: multiplexer cycling, each channel's conversion instant from its position
in the row), or point samples where no data rate does -- what ``build`` designs for the
written file; and each sensor's or candidate's ``highpass_hz``, ``average_s`` and ``drift``.

Its smoother model is the build's (:func:`offline.smoother.chain.sensor_model` on the
continuous ``[modes, forces]`` system, the design path's ``_discretise``): per layout one
discretisation per model-error level and one Riccati solution per level, as for point samples.
The layout's calibration-run error (:func:`offline.placement.honest.smoother_nrmse`) sees each
channel through its conversion and sensor: the full model's transfer function times the
chain's response (:meth:`edge.acquisition.Chain.response`); the drifting offsets are left out
of the runs, as the build's calibration runs leave them out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge.acquisition import Chain
from offline.model.sections import parse_acquisition
from offline.model.table import ModelFileError
from offline.smoother.chain import sensor_model


@dataclass
class ChainedModel:
    """The continuous smoother model shared by every layout, and the layout's chain.

    Ac : (ns, ns) continuous ``[modes, forces]`` system;  Qcs : its noise intensity at each
    model-error level;  C : (nfix + ncand, ns) the sensors' then the candidates' rows;
    n2 : structural states (2 per mode);  proportional : exact zeros outside each mode's
    block;  X : (ns, ns) stationary covariance of the discrete point model (state scaling);
    spec : the model file;  entries : the sensors' then the candidates' specs
    """

    Ac: np.ndarray
    Qcs: tuple
    C: np.ndarray
    dt: float
    n2: int
    proportional: bool
    X: np.ndarray
    spec: object
    entries: list
    nfix: int
    freqs: np.ndarray
    cache: dict = field(default_factory=dict)

    def channels(self, idx) -> np.ndarray:
        """Indices into :attr:`entries` of the layout ``idx`` (candidate indices)."""
        return np.concatenate([np.arange(self.nfix), self.nfix + np.sort(np.asarray(idx, int))])

    def chain(self, idx) -> Chain:
        """The chain the build gives the placed model file of layout ``idx``."""
        return layout_chain(self.spec, [self.entries[i] for i in self.channels(idx)])

    def system(self, idx, chain: Chain):
        """``(A, [Q per level], H, d)`` of the layout's smoother with ``chain``: the build's
        discretisation (module docstring) and the state scaling ``d`` of the Riccati solve."""
        rows = self.C[self.channels(idx)]
        nch = rows.shape[0]
        out = [sensor_model(self.Ac, Qc, rows, self.dt, chain, nch) for Qc in self.Qcs]
        A, H = out[0][0], out[0][3]
        ns = self.Ac.shape[0]
        if self.proportional:  # exact zeros outside the structure (as the design path)
            nz = A.shape[0]
            mask = np.ones((nz, nz), bool)
            mask[:ns, :self.n2] = False
            for i in range(0, self.n2, 2):
                mask[i:i + 2, i:i + 2] = True
            A = np.where(mask, A, 0.0)
        Qs = [o[1] for o in out]
        return A, Qs, H, _scales(A, Qs[0], self.X, chain.intervals(self.dt, nch))

    def response(self, idx, chain: Chain) -> np.ndarray:
        """(nb, nch) each channel's conversion and sensor response on the grid's bins
        (:meth:`edge.acquisition.Chain.response`): the converter's taps once per converter
        and data rate, times each channel's delay and sensor."""
        nch = len(self.channels(idx))
        key = (chain.converter, chain.drate, chain.cutoff, chain.group_delay)
        if key not in self.cache:
            conv = dataclasses.replace(chain, offsets=(), highpass=(), average=(), drift=())
            self.cache[key] = conv.response(self.freqs, 1)[:, 0]
        sensors = Chain(highpass=chain.highpass, average=chain.average)
        delay = np.exp(-2j * np.pi * np.outer(self.freqs, chain.offsets_for(nch)))
        return self.cache[key][:, None] * delay * sensors.response(self.freqs, nch)


def _scales(A, Q, Xz, W: int) -> np.ndarray:
    """Stationary std of each state of a chained model (the Riccati scaling,
    :func:`offline.placement.riccati.riccati`): the point model's ``Xz`` on the structure and
    force states, propagated ``X <- A X A^T + Q`` over ``W + 2`` steps (the conversions' states
    are exact after ``W``; a high-pass or drifting offset's a scale)."""
    nz, ns = A.shape[0], Xz.shape[0]
    X = np.zeros((nz, nz))
    X[:ns, :ns] = Xz
    for _ in range(W + 2):
        X = A @ X @ A.T + Q
    d = np.sqrt(np.clip(np.diag(X), 0.0, None))
    return np.maximum(d, 1e-12 * float(np.max(d)))


def layout_chain(spec, entries) -> Chain:
    """``ModelSpec.chain()`` of the model file with ``[[sensors]]`` = ``entries``: its
    ``[acquisition]`` resolved for that many channels by the model parser (the default data
    rate, mode and cycling offsets depend on the count), as the build reads the placed file.
    Where the parser would refuse that file (per-channel ``offsets`` for another count, no
    ADS1256 data rate for the rate with that many channels) a ``ValueError`` says so."""
    try:
        acq = parse_acquisition(spec.raw, Path(spec.path).name, spec.estimator, len(entries))
    except ModelFileError as exc:
        raise ValueError(f"a layout of {len(entries)} channel(s) would be refused by the "
                         f"build: {exc}") from None
    return dataclasses.replace(spec, sensors=list(entries), acquisition=acq).chain()
