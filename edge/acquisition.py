"""The measurement chain a bundle is built for: what one sample of a channel is.

``ideal``: a point sample of the structure's response at the row's time stamp ``t_k``.
``ads1256``: the ADS1256's conversion (:mod:`edge.hw.ads1256_filter`): the taps-weighted mean
of the input over the modulator instants of a window ending ``offset_c`` seconds before
``t_k``::

    y_k,c = sum_i h_i C_c x(t_k - offset_c - i / F_MOD) + v_k,c

``daq``: a generic acquisition system's linear-phase anti-alias FIR, given as its data sheet
states it, by its cut-off ``fc`` [Hz] and group delay ``tau`` [s] (:func:`daq_taps`: a
Blackman-windowed sinc over ``[0, 2 tau]`` at 64 times the data rate, unity DC gain).
``offset_c`` is 0 for every channel in continuous mode; with the multiplexer cycling, each
channel of a row is converted in its own window and ``offset_c`` is how long before the row's
time stamp that channel's window ends. The bundle stores the chain (fields ``chain_*``,
schema 7) so that the estimator's measurement model and the device's ADC configuration can be
compared; a bundle of schema <= 6 is ``ideal``. ``chain_markov`` (schema 10; 0 before): the
Tikhonov estimators' Markov parameters are those of the conversions
(:mod:`edge.estimator.chain_window`), not of point samples.

Each sensor's own dynamics come before the converter (schema 8, per channel, 0 = none): a
first-order high-pass of corner ``highpass_hz`` (an IEPE accelerometer's coupling), a moving
average over ``average_s`` seconds (a laser sensor's averaging), then a random-walk offset of
intensity ``drift`` [unit / sqrt(s)] (a DC path's slow drift: ``b' = w``, ``E[w w] = drift^2
delta``)::

    u_c(t) = (1 / T_c) int_{t - T_c}^{t} HP_c(C_c x)(s) ds + b_c(t),   HP_c(s) = s / (s + w_c)

A bundle of schema <= 7 has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.hw.ads1256_filter import F_MOD, conversion_response, conversion_taps

#: converters the estimator models
CONVERTERS = ("ideal", "ads1256", "daq")
#: taps per sample interval of the generic DAQ's FIR (:func:`daq_taps`)
DAQ_OVERSAMPLE = 64
#: ADC modes: one channel converted continuously, or the multiplexer cycling over channels
MODES = ("continuous", "cycle")


def conversion_intervals(offsets, span: float, dt: float) -> int:
    """Sample intervals ``W`` (at least 2) that a conversion window of length ``span`` [s]
    ending ``offsets`` (per channel) before the row can reach back over."""
    end = float(np.max(offsets, initial=0.0)) + span
    return max(2, int(np.ceil(end / dt - 1e-9)))


def daq_taps(drate: float, cutoff: float, group_delay: float):
    """``(h, spacing)`` of a linear-phase low-pass FIR with cut-off ``cutoff`` [Hz] (-6 dB)
    and group delay ``group_delay`` [s]: ``h_i = sinc(2 fc (t_i - tau)) w_i`` at ``t_i = i
    spacing`` over ``[0, 2 tau]`` (``w``: Blackman window), ``spacing = 1 / (64 drate)``,
    ``sum(h) = 1``; symmetric, so ``h[0]`` at the window's end as for the ADS1256."""
    spacing = 1.0 / (DAQ_OVERSAMPLE * float(drate))
    m = max(1, int(round(group_delay / spacing)))
    t = (np.arange(2 * m + 1) - m) * spacing
    h = np.sinc(2.0 * cutoff * t) * np.blackman(2 * m + 1)
    return h / h.sum(), spacing


@dataclass(frozen=True)
class Chain:
    """Converter, its data rate [SPS] and mode, each channel's window end before ``t_k`` [s]
    (``()``: all 0, which all-zero offsets become); a ``daq``'s FIR cut-off [Hz] and group
    delay [s]."""

    converter: str = "ideal"
    drate: float = 0.0
    mode: str = "continuous"
    offsets: tuple = ()
    cutoff: float = 0.0
    group_delay: float = 0.0
    highpass: tuple = ()   # per channel: first-order high-pass corner [Hz] (0: none)
    average: tuple = ()    # per channel: moving-average window [s] (0: none)
    drift: tuple = ()      # per channel: random-walk offset intensity [unit / sqrt(s)]
    #: the Tikhonov estimators' Markov parameters are the conversions' (schema 10,
    #: :mod:`edge.estimator.chain_window`); False: a point sample's (schema <= 9). How an
    #: estimator models the chain, not the chain: not compared
    markov: bool = field(default=True, compare=False)

    def __post_init__(self):
        if self.converter not in CONVERTERS:
            raise ValueError(f"chain converter {self.converter!r} is not one of "
                             f"{', '.join(CONVERTERS)}")
        if self.mode not in MODES:
            raise ValueError(f"chain mode {self.mode!r} is not one of {', '.join(MODES)}")
        off = tuple(float(o) for o in self.offsets)
        object.__setattr__(self, "offsets", off if any(o != 0.0 for o in off) else ())
        for name in ("highpass", "average", "drift"):
            v = tuple(float(x) for x in getattr(self, name))
            if not all(np.isfinite(x) and x >= 0 for x in v):
                raise ValueError(f"chain {name}: values must be finite and >= 0, got {v}")
            object.__setattr__(self, name, v if any(x != 0.0 for x in v) else ())
        if self.converter != "ideal" and not self.drate > 0:
            raise ValueError(f"chain drate must be > 0 for converter {self.converter!r}, "
                             f"got {self.drate!r}")
        if self.converter == "daq" and not (0 < self.cutoff <= 0.5 * self.drate
                                            and self.group_delay > 0):
            raise ValueError(f"chain daq: cutoff must be in (0, drate / 2 = "
                             f"{0.5 * self.drate:g}] Hz and group_delay > 0 s, got "
                             f"{self.cutoff!r}, {self.group_delay!r}")

    @property
    def ideal(self) -> bool:
        """The converter is ``ideal`` (point samples of the sensors' outputs)."""
        return self.converter == "ideal"

    @property
    def dynamic(self) -> bool:
        """Some sensor has dynamics or a drifting offset (:meth:`highpass_for` ..)."""
        return bool(self.highpass or self.average or self.drift)

    @property
    def point(self) -> bool:
        """Point samples of the structure's response: an ``ideal`` converter and no sensor
        dynamics (what the estimators other than the smoother model)."""
        return self.ideal and not self.dynamic

    def _per_channel(self, name: str, nch: int) -> np.ndarray:
        v = getattr(self, name)
        if not v:
            return np.zeros(nch)
        if len(v) != nch:
            raise ValueError(f"chain {name}: {len(v)} values for {nch} channels")
        return np.array(v, dtype=float)

    def highpass_for(self, nch: int) -> np.ndarray:
        """(nch,) each sensor's first-order high-pass corner [Hz] (0: none)."""
        return self._per_channel("highpass", nch)

    def average_for(self, nch: int) -> np.ndarray:
        """(nch,) each sensor's moving-average window [s] (0: none)."""
        return self._per_channel("average", nch)

    def drift_for(self, nch: int) -> np.ndarray:
        """(nch,) each sensor's random-walk offset intensity [unit / sqrt(s)] (0: none)."""
        return self._per_channel("drift", nch)

    def sensor_states(self, nch: int) -> tuple:
        """``(nr, nb)``: the smoother's high-pass states (one per high-passed channel) and
        offset states (one per drifting channel)."""
        return (int(np.count_nonzero(self.highpass_for(nch))),
                int(np.count_nonzero(self.drift_for(nch))))

    def offsets_for(self, nch: int) -> np.ndarray:
        """(nch,) each channel's window end before the row's time stamp [s]."""
        if not self.offsets:
            return np.zeros(nch)
        if len(self.offsets) != nch:
            raise ValueError(f"chain offsets: {len(self.offsets)} values for {nch} channels")
        return np.array(self.offsets, dtype=float)

    def taps(self):
        """``(h, spacing)``: one conversion's taps (``h[0]`` at the window's end) and their
        spacing [s]; ``(ones(1), 0)`` for ``ideal``."""
        if self.ideal:
            return np.ones(1), 0.0
        if self.converter == "daq":
            return daq_taps(self.drate, self.cutoff, self.group_delay)

        return conversion_taps(self.drate), 1.0 / F_MOD

    def intervals(self, dt: float, nch: int) -> int:
        """Sample intervals ``W`` one conversion can span (its window, the sensor's moving
        average and the channel's offset, at least 2): the smoother carries ``W`` states per
        channel; 0 for an ideal converter without moving averages (point samples)."""
        avg = self.average_for(nch)
        if self.ideal and not np.any(avg):
            return 0
        h, spacing = self.taps()
        return conversion_intervals(self.offsets_for(nch) + avg, (len(h) - 1) * spacing, dt)

    def n_states(self, nch: int, dt: float) -> int:
        """States the smoother adds for this chain, after the model's: one per high-passed
        channel, one per drifting channel (the offset), then ``W`` per channel
        (:meth:`intervals`: the parts of the conversions in progress); 0 for point
        samples."""
        return sum(self.sensor_states(nch)) + self.intervals(dt, nch) * nch

    def response(self, freqs, nch: int, chunk: int = 256) -> np.ndarray:
        """``(nf, nch)`` complex: each channel's continuous-time frequency response, the
        conversion seen from the row's time stamp (1 for ``ideal``)::

            G_c(f) = sum_i h_i exp(-2 pi j f (offset_c + i spacing))

        (the spectrum of the sampled conversions is ``sum_m |G(f + m fs)|^2 S(f + m fs)``)."""
        f = np.asarray(freqs, dtype=float)
        if self.ideal:
            return np.ones((f.size, nch), dtype=complex) * self._sensor_response(f, nch)
        off = self.offsets_for(nch)
        if self.converter == "ads1256":  # the taps' sum in closed form
            base = conversion_response(self.drate, f)
        else:
            h, spacing = self.taps()
            lag = np.arange(h.size) * spacing
            base = np.empty(f.size, dtype=complex)
            for a in range(0, f.size, chunk):  # sum_i h_i exp(-2 pi j f i spacing), in chunks
                base[a:a + chunk] = np.exp(-2j * np.pi * np.outer(f[a:a + chunk], lag)) @ h
        return (base[:, None] * np.exp(-2j * np.pi * np.outer(f, off))
                * self._sensor_response(f, nch))

    def _sensor_response(self, f: np.ndarray, nch: int) -> np.ndarray:
        """``(nf, nch)``: each sensor's own response (the offset is no response)::

            HP(f) = j w / (j w + w_c),   MA(f) = (1 - exp(-j w T)) / (j w T)   (w = 2 pi f)"""
        out = np.ones((f.size, nch), dtype=complex)
        jw = 2j * np.pi * f[:, None]
        wc = 2 * np.pi * self.highpass_for(nch)[None, :]
        T = self.average_for(nch)[None, :]
        out = np.where(wc > 0, jw / (jw + wc + (wc == 0)), out)
        with np.errstate(invalid="ignore", divide="ignore"):
            ma = (1.0 - np.exp(-jw * T)) / (jw * T)
        # MA(0) = 1; no average: 1
        return out * np.where((T > 0) & (jw != 0), ma, 1.0)

    def as_dict(self) -> dict:
        return {"converter": self.converter, "drate": float(self.drate), "mode": self.mode,
                "offsets": list(self.offsets), "cutoff": float(self.cutoff),
                "group_delay": float(self.group_delay), "highpass_hz": list(self.highpass),
                "average_s": list(self.average), "drift": list(self.drift)}


def chain_of(a: dict):
    """The :class:`edge.acquisition.Chain` of a validated bundle's arrays (``ideal`` before
    schema 7, no sensor dynamics before schema 8)."""
    version = int(a["schema_version"])
    if version < 7:
        return Chain()
    off = np.asarray(a["chain_offset"], dtype=float)
    fc, tau = (float(v) for v in np.asarray(a["chain_filter"], dtype=float))
    dyn = [tuple(np.asarray(a[k], dtype=float).tolist()) if version >= 8 else ()
           for k in SENSOR_FIELDS]
    markov = bool(int(a["chain_markov"])) if version >= 10 else False
    return Chain(str(a["chain_converter"]), float(a["chain_drate"]), str(a["chain_mode"]),
                 tuple(off.tolist()), fc, tau, *dyn, markov=markov)


#: the per-channel sensor dynamics fields of a bundle (schema 8), in Chain's order
SENSOR_FIELDS = ("chain_highpass_hz", "chain_average_s", "chain_drift")


def validate_chain(a: dict, version: int, nch: int, fail) -> int:
    """The ``chain_*`` fields of a bundle's arrays (schema 7; ``fail(field, message)``
    raises); returns the smoother's chain states (:meth:`Chain.n_states`)."""
    if version < 7:
        return 0
    conv, mode = str(a["chain_converter"]), str(a["chain_mode"])
    if conv not in CONVERTERS:
        fail("chain_converter", f"{conv!r} is not one of {', '.join(CONVERTERS)}")
    if mode not in MODES:
        fail("chain_mode", f"{mode!r} is not one of {', '.join(MODES)}")
    drate = float(a["chain_drate"])
    if not np.isfinite(drate) or drate < 0 or (conv != "ideal" and drate == 0):
        fail("chain_drate", f"must be finite and > 0 (>= 0 for ideal), got {drate}")
    filt = np.asarray(a["chain_filter"])
    if filt.shape != (2,) or not np.all(np.isfinite(filt)) or np.any(filt < 0) or (
            conv == "daq" and not (0 < filt[0] <= 0.5 * drate and filt[1] > 0)):
        fail("chain_filter", f"must be [cut-off in (0, drate / 2], group delay > 0] for "
                             f"daq, [0, 0] otherwise; got {filt.tolist()}")
    off = np.asarray(a["chain_offset"])
    if off.shape != (nch,):
        fail("chain_offset", f"shape {off.shape}, expected ({nch},)")
    if not np.all(np.isfinite(off)) or np.any(off < 0) or np.any(off >= float(a["dt"])):
        fail("chain_offset", "offsets must be finite, >= 0 and below dt")
    for k in SENSOR_FIELDS if version >= 8 else ():
        v = np.asarray(a[k])
        if v.shape != (nch,):
            fail(k, f"shape {v.shape}, expected ({nch},)")
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            fail(k, f"values must be finite and >= 0 (0: none), got {v.tolist()}")
    if version >= 10 and int(a["chain_markov"]) not in (0, 1):
        fail("chain_markov", f"must be 0 or 1, got {int(a['chain_markov'])}")
    return chain_of(a).n_states(nch, float(a["dt"]))
