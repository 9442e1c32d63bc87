"""What the records' sensor columns hold: the model's response through the model file's
measurement chain (the converter's window at each channel's instant, each sensor's high-pass
and moving average; docs/hardware.md "The conversion chain").

The forward model (:class:`offline.calibration.forward.TimeModel`) gives the response ``y_c``
at the sample instants; the device records, for each channel ``c``, the conversion

    m_c(t_k) = integral h_c(tau) y_c(t_k - tau) d tau,
    G_c(f) = sum_i h_i exp(-2 pi j f (o_c + i delta)) HP_c(f) MA_c(f)

(:meth:`edge.acquisition.Chain.response`: the conversion's taps ``h_i`` at spacing ``delta``
from the channel's window end ``o_c`` before the row's time stamp, times the sensor's own
response). The forward model's force is band-limited between samples (its up-sampling), so its
response is too, and ``m_c`` is ``y_c`` filtered by ``G_c`` at every frequency below the
Nyquist frequency: one real FFT per record and channel (zero-padded, the structure at rest
before the record and the conversions looking back only)::

    M_c = IFFT( G_c(f_n) FFT(y_c) ),    f_n = n / (N dt)

The sensitivities ``dy/dtheta`` go through the same linear map. A sensor's drifting offset is
not a response: ``[bayes] offsets`` calibrate a constant one. Without this map, a record of the
ADS1256 at 1,000 SPS (half a sample of delay and the window's gain) left the residual
correlated (lag 0.92) and moved the cantilever's E by 1.5 and k_root by 0.9 posterior std,
with stds 14-30x wider than on point samples.
"""

from __future__ import annotations

import numpy as np

#: samples after the record before the FFT: the record continued by its odd reflection about
#: its last sample (value and slope continuous), tapered to rest (cos^2) over these samples, so
#: that the circular convolution sees no jump at the end (a zero pad left 27 % of the signal's
#: std in the last sample and 3 % ten samples before; this continuation 0.7 % and 0.05 %)
PAD = 256


class Measurement:
    """The chain's map from the response at the sample instants to the recorded columns, for
    records of ``n`` samples at ``dt`` (cached per length).

    ``chain`` : :class:`edge.acquisition.Chain` (its ``point`` chains map to themselves).
    """

    def __init__(self, chain, dt: float, nch: int):
        self.chain, self.dt, self.nch = chain, float(dt), int(nch)
        self._G = {}

    @property
    def identity(self) -> bool:
        """Point samples of the structure's response: nothing to apply."""
        return self.chain is None or self.chain.point

    def _gains(self, n: int):
        """``(N, G)``: the padded FFT length and ``G_c(f_n)`` on its ``rfft`` bins, (nf, nch)."""
        if n not in self._G:
            N = int(2 ** np.ceil(np.log2(n + PAD)))
            f = np.fft.rfftfreq(N, self.dt)
            G = self.chain.response(f, self.nch)
            # the Nyquist bin of a real signal carries a real amplitude only
            if N % 2 == 0:
                G[-1] = G[-1].real
            self._G[n] = (N, G)
        return self._G[n]

    def apply(self, Y: np.ndarray) -> np.ndarray:
        """``Y`` (..., n, nch) -> the recorded columns, same shape (``Y`` itself for a point
        chain)."""
        if self.identity:
            return Y
        n = Y.shape[-2]
        N, G = self._gains(n)
        # after the end: y_{n-1+k} = (2 y_{n-1} - y_{n-1-k}) w_k, w a cos^2 taper to 0; then
        # zeros up to N, wrapping to the rest before t_0
        m = min(PAD, n - 1)
        w = np.cos(0.5 * np.pi * np.arange(1, m + 1) / (m + 1)) ** 2
        # y_{n-1-k}, k = 1..m: the m samples before the last, latest first
        before = Y[..., n - 1 - m:n - 1, :][..., ::-1, :]
        tail = (2.0 * Y[..., n - 1:n, :] - before) * w[:, None]
        P = np.fft.rfft(np.concatenate([Y, tail], axis=-2), n=N, axis=-2)
        return np.fft.irfft(P * G, n=N, axis=-2)[..., :n, :]


def chain_of_records(spec, dt: float):
    """``(chain, warning)``: the chain (:class:`edge.acquisition.Chain`) records at ``dt`` of
    the model file ``spec`` went through, or None for point samples. Its chain
    (:meth:`offline.model.ModelSpec.chain`, the ADS1256 by default) when the records are at
    the estimator's rate, the rate the chain is declared for; otherwise point samples, with a
    warning naming both rates (the chain is declared for the estimator's rate only, so a
    record at another rate is compared with the response at its sample instants). Every
    calibration mode decides by this one rule (the time-domain :func:`of_records`, the
    operational likelihood :mod:`.operational`)."""
    chain = spec.chain()
    rate = spec.estimator.rate if spec.estimator is not None else None
    if chain.point:
        return None, None
    if rate is None or abs(1.0 / dt - rate) > 1e-6 * rate:
        return None, (f"the records are at {1.0 / dt:.10g} samples/s, not the model file's "
                      f"[estimator] rate {rate!r} its measurement chain "
                      f"({chain.converter}) is declared for: the records are compared with "
                      "the model's response at the sample instants (point samples); record at "
                      "the estimator's rate to calibrate through the chain")
    return chain, None


def of_records(spec, dt: float):
    """``(measurement, warning)`` for records at ``dt`` of the model file ``spec``: the
    :class:`Measurement` of :func:`chain_of_records`'s chain (None: point samples)."""
    chain, warning = chain_of_records(spec, dt)
    return (None if chain is None else Measurement(chain, dt, len(spec.sensors))), warning


def describe(chain) -> str:
    """One line naming the chain the records are compared through."""
    what = chain.converter + (f" {chain.drate:g} SPS {chain.mode}" if not chain.ideal else "")
    dyn = [n for n in ("highpass", "average") if getattr(chain, n)]
    return what + (f", the sensors' {' and '.join(dyn)}" if dyn else "")
