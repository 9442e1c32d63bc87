"""The records' spectral matrix through the measurement chain: what the operational likelihood
(:mod:`offline.calibration.operational`) compares the records' Welch matrices with.

Each channel's column is the structure's response through a linear time-invariant map, the
conversion seen from the row's time stamp times the sensor's own dynamics
(:meth:`edge.acquisition.Chain.response`: the ADS1256's taps at the channel's own instant in
the row, an IEPE high-pass, a laser's moving average), plus the sensor's drifting offset and
its white noise. With ``G(f) = diag(G_c(f))`` the records' spectral matrix is::

    S_m(f) = G(f) H(f) S_ff(f) H(f)^H G(f)^H + diag(walk_c(f)) + diag(s_c^2) dt

``walk_c`` the declared random walk's expected Welch estimate, converted by the chip
(:func:`offline.load.walk.walk_spectra`, as record learning adds it). Aliasing: the images
``G(f + m fs) H(f + m fs)`` are left out, as the operational likelihood of point samples left
them out: the forces are declared (and fitted) below the Nyquist frequency, and the chip's
window suppresses what a response reaches above it (the ADS1256 in continuous mode has its
sinc zeros at the multiples of the data rate). The cycled channels' instants enter as the
phase ``exp(-2 pi j f o_c)`` of ``G_c``: the cross-spectra of two channels converted ``o_1 -
o_2`` apart carry that phase, which point samples do not model.

Which chain: the one rule of :func:`offline.calibration.measurement.chain_of_records`
(records at the ``[estimator] rate`` are the model file's chain, others point samples with a
warning), so that the time-domain and the operational calibrations decide alike. A sensor's
declared ``drift`` is the sensor's and is modelled either way (on point samples unconverted).
"""

from __future__ import annotations

import numpy as np

from edge.acquisition import Chain
from offline.calibration.measurement import chain_of_records, describe


def records_chain(spec, dt: float):
    """``(chain, warning)``: the :class:`edge.acquisition.Chain` the records at ``dt`` of the
    model file ``spec`` went through (module docstring); point samples are an ``ideal``
    chain carrying the sensors' declared drift only."""
    chain, warning = chain_of_records(spec, dt)
    if chain is None:
        chain = Chain(drift=spec.chain().drift_for(len(spec.sensors)))
    return chain, warning


def _samples_only(chain) -> bool:
    """An ideal converter without the sensors' high-pass or moving average: the records are
    point samples of the response (a declared drift is noise, not a response)."""
    return chain.ideal and not (chain.highpass or chain.average)


def chain_gains(chain, f, nch: int):
    """``G_c(f)`` (nf, nch) of ``chain`` on the grid ``f`` [Hz], or None for point samples
    (nothing to apply)."""
    if chain is None or _samples_only(chain):
        return None
    return chain.response(np.asarray(f, dtype=float), nch)


def through_chain(G, H):
    """``G_c(f) H_c,j(f)``: the force -> record transfer (nf, nch, nforces) of the structure's
    ``H`` through the chain's gains ``G`` (nf, nch) (``H`` itself when ``G`` is None)."""
    return H if G is None else G[:, :, None] * H


def measurement_label(chain) -> str:
    """``posterior.json``'s ``measurement``: as the time-domain calibration writes it, plus
    the drifting offsets when some sensor declares one."""
    base = "point samples" if _samples_only(chain) else describe(chain)
    return base + (", the sensors' drifting offsets" if chain.drift else "")
