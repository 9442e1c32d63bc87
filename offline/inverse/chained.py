"""The experiment's windows as the device records them: the bundle's measurement chain applied
to the simulated response before the noise (docs/inverse.md "The measurement chain").

The device captures the ``[experiment]`` window from the rows the acquisition hands the daemon
(:class:`edge.inverse.WindowCapture` in :meth:`edge.inverse.hook.InverseHook.push`): with a
converter these are its conversions, each channel ``c`` the response filtered by the chain's
continuous response ``G_c`` (:meth:`edge.acquisition.Chain.response`)::

    m_c(t_k) = IFFT( G_c(f) FFT(y_c) )(t_k)

which :class:`offline.calibration.measurement.Measurement` applies, exact below the Nyquist
frequency of the grid it is applied on (the structure at rest before the window). A pulse
excites the structure above the rows' Nyquist frequency (examples/cantilever_params.toml: on
the rows the map missed the chip's taps by 0.038 of the window's std); it is applied on the
simulation's own grid, ``substeps`` nodes per row, and the rows kept (:func:`windows`: 4e-5 of
the std from 2 nodes per row on). The chain is
declared per sensor at the estimator's rate; an experiment at another rate is not what the
chain describes, and a drifting offset is no response: both are reported as the reason the
maps cannot model the chain (:func:`experiment_measurement`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from offline.calibration.measurement import Measurement
from offline.inverse.parametric import simulate


def channel_chain(chain, sensors, channels):
    """``chain`` (declared per sensor, in ``sensors`` order) restricted to the experiment's
    ``channels`` (sensor names, in their order): each channel keeps its own window end and
    dynamics."""
    sensors = list(sensors)
    missing = [c for c in channels if c not in sensors]
    if missing:
        raise ValueError(f"[experiment].channels: {missing} are not sensors of the chain "
                         f"(have {sensors})")
    idx = [sensors.index(c) for c in channels]
    n = len(sensors)

    def pick(v):  # per-sensor tuple -> per-channel tuple (() stays (): all 0)
        return tuple(np.asarray(v, float)[idx].tolist()) if v else ()

    off = chain.offsets_for(n)[idx] if chain.offsets else ()
    return replace(chain, offsets=tuple(off), highpass=pick(chain.highpass),
                   average=pick(chain.average), drift=pick(chain.drift))


def experiment_measurement(chain, sensors, experiment, rate: float):
    """``(measurement, reason)`` of the experiment's windows.

    ``chain``: the bundle's :class:`edge.acquisition.Chain` (None: point samples), declared
    for ``sensors`` (names) at ``rate`` rows/s (the estimator's). ``measurement``: the
    :class:`Measurement` of the experiment's channels, None for point samples or when the
    chain cannot be modelled; ``reason``: why not (None when the windows are modelled)."""
    if chain is None or chain.point:
        return None, None
    if not abs(float(experiment.rate) - float(rate)) <= 1e-6 * float(rate):
        return None, (f"the [experiment] runs at {experiment.rate:.10g} samples/s, the chain "
                      f"is declared for the estimator's {rate:.10g} rows/s")
    sub = channel_chain(chain, sensors, experiment.channels)
    if sub.drift:
        return None, ("the sensors' drifting offsets (drift) are no response the maps can "
                      "be trained on")
    return Measurement(sub, 1.0 / float(rate), len(experiment.channels)), None


def describe(measurement) -> dict | None:
    """What the maps were trained on, for the map's meta: the chain of the experiment's
    channels (:meth:`edge.acquisition.Chain.as_dict`), None for point samples."""
    if measurement is None or measurement.identity:
        return None
    return measurement.chain.as_dict()


def windows(pm, thetas, excitation: dict, n: int, rate: float, substeps: int,
            measurement) -> np.ndarray:
    """The recorded windows (S, n, nch), noise-free: the response on the Newmark grid
    (``substeps`` nodes per row, :func:`offline.inverse.parametric.simulate` recording every
    node) converted by ``measurement``'s chain on that grid, at the rows::

        m_c(t_k) = IFFT( G_c(f) FFT(y_c on h = 1 / (rate substeps)) )(t_k)

    Point samples (``measurement`` None or a point chain): :func:`simulate` itself."""
    if measurement is None or measurement.identity:
        return simulate(pm, thetas, excitation, n, rate, substeps)
    s = int(substeps)
    # the same Newmark steps as simulate(..., n, rate, substeps), every node recorded
    y = simulate(pm, thetas, excitation, (n - 1) * s + 1, rate * s, 1)
    fine = Measurement(measurement.chain, measurement.dt / s, measurement.nch)
    return fine.apply(y)[..., ::s, :]
