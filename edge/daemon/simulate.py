"""Simulated sensor signals for ``vsense-edge run --simulate`` (no hardware needed).

``[simulate] level = "adc"`` feeds these sources to the byte-level ADS1256 simulator
(``edge.hw.sim_ads1256``) through :class:`InputSource` and reads them back with the real
driver; ``level = "signal"`` delivers them directly with
:class:`edge.daemon.sim_signal.SignalAcquisition`.

Two sources, both producing the channels' **voltages** (what the ADC sees):

* ``structure``: the bundle's own reduced model (forward Newmark, paper 004 eq. 14-15, in
  :data:`MODEL_SUBSTEPS` steps per sample)
  driven at its force DOFs by a load profile (by default the bundle's own load model and
  sensor noise: :mod:`edge.daemon.sim_load`); channel ``c`` reads u, v or a at its DOF;
  volts = physical * sensitivity + offset, plus noise.
* ``file``: a measurement CSV ``time,<channel names>`` (SI units, the bundle's rate).

:class:`edge.daemon.sim_signal.SignalAcquisition` delivers a source through the same
``read(out_values, out_t_ns, out_flags) -> n`` interface as the ADS1256 driver; the
byte-level ADS1256 simulator (``edge.hw.sim_ads1256``) consumes the same sources through
:class:`InputSource`.
"""

from __future__ import annotations

import numpy as np

from edge.csvio import read_table
from edge.daemon.sim_load import ModelLoad, bundle_load_meta
from edge.estimator.newmark import effective_stiffness, internal_force, update_rates
from edge.hw.ads1256_filter import F_MOD, grid_weights
from edge.kinds import kind_order


#: Newmark steps per sample interval of the structure under a load (not the identification
#: excitation, which has its own)
MODEL_SUBSTEPS = 8


class SimulationFinished(EOFError):
    """The simulated source reached ``duration_s`` (a clean end of the run)."""


class StructureSource:
    """Streaming forward simulation of a bundle's reduced model.

    Parameters
    ----------
    bundle : edge.bundle.Bundle
    sensitivity, offset : ndarray (nch,)
        Channel calibration [V/unit], [V].
    load : "model" | "random" | "sine" | "impulse" | "chirp"
        ``model``: the bundle's load model (``meta["load_model"]``) times ``amplitude``, and
        each channel's noise the bundle's own (``1 / sqrt(channel weight)``, the noise the
        estimator was designed for; times ``amplitude`` too where the model file declared
        it relative to the signal) on every converted row; a ValueError for a bundle
        without one
    amplitude : float  [N]; with ``model``: the factor on the load model's forces
    frequency : float  [Hz]
    noise : float      measurement noise std relative to the channel's signal std (with
        ``model``: in addition to the bundle's own)
    seed : int
    """

    def __init__(self, bundle, sensitivity, offset, load="model", amplitude=1.0,
                 frequency=10.0, noise=0.0, seed=0):
        self.M, self.C, self.K = bundle.M, bundle.C, bundle.K
        self.dt = bundle.dt
        self.beta, self.gamma = bundle.beta, bundle.gamma
        n = bundle.n
        self.force_dof = np.array([f.dof for f in bundle.forces], int)
        self.ch_dof = np.array([c.dof for c in bundle.channels], int)
        self.ch_kind = np.array([kind_order(c.kind) for c in bundle.channels], int)
        self.sens = np.asarray(sensitivity, float)
        self.off = np.asarray(offset, float)
        self.load, self.amp, self.freq = load, float(amplitude), float(frequency)
        self.noise = float(noise)
        self.rng = np.random.default_rng(seed)
        self.Keff_inv = np.linalg.inv(effective_stiffness(self.M, self.C, self.K, self.dt,
                                                          self.beta, self.gamma))
        self.u, self.v, self.a = np.zeros(n), np.zeros(n), np.zeros(n)
        self.k = 0
        self._lp = np.zeros(len(self.force_dof))
        self._scale = None  # per-channel signal std for relative noise (from the first chunk)
        self._exc_pending = None  # (force history, force index) to start at the next chunk
        self._exc = None  # (first sample, force history, force index) being applied
        self.model_load, self.row_noise = None, None
        if load == "model":
            lm = bundle_load_meta(bundle)
            if lm is None:
                raise ValueError("load \"model\": the bundle carries no load model "
                                 "(meta[\"load_model\"], written by vsense-offline build)")
            if len(lm["forces"]) != len(self.force_dof):
                raise ValueError(f"load \"model\": the bundle's load model has "
                                 f"{len(lm['forces'])} forces for {len(self.force_dof)}")
            self.model_load = ModelLoad(lm, self.dt, self.amp, seed)
            # the sensors' noise the estimator was designed for: R = diag(1 / weight) [V],
            # scaled with the load where the model file declared it relative to the signal
            w = np.array([c.weight for c in bundle.channels], float)
            e = bundle.meta.get("estimator") or {}
            relative = e.get("load_levels_scale_noise", lm.get("noise_std") is None)
            self.row_noise = self.sens / np.sqrt(w) * (self.amp if relative else 1.0)
        # True: a converter (edge.daemon.simulate.InputSource) adds row_noise per conversion
        self.noise_in_converter = False

    def inject_excitation(self, f, substeps: int = 1, force: int = 0) -> int:
        """Apply the known excitation of an identification experiment.

        ``f`` ((n-1) substeps + 1,) [N] is the force at ``substeps`` points per sample
        interval. The simulated rig behaves like a test stand between runs: at the start of the
        next generated chunk the structure is at rest (state reset), the load is off, and ``f``
        drives force ``force``, integrated with ``substeps`` Newmark steps per sample (as the
        training data of the maps); then the load resumes. Returns the index of the first
        excited sample (where the capture window must start).
        """
        sub = int(substeps)
        f = np.asarray(f, dtype=float).ravel()
        if sub < 1 or (f.size - 1) % sub:
            raise ValueError(f"excitation of {f.size} points does not fit {sub} substeps")
        if sub > 1 and getattr(self, "_sub", None) != sub:
            h = self.dt / sub
            self._Keff_inv_sub = np.linalg.inv(effective_stiffness(self.M, self.C, self.K, h,
                                                                   self.beta, self.gamma))
            self._sub = sub
        self._exc_pending = (f, int(force), sub)
        return int(self.k)

    def forces(self, k0: int, n: int) -> np.ndarray:
        """Load history ``(n, nf)`` [N] at samples ``k0 .. k0+n-1``."""
        t = (k0 + np.arange(n)) * self.dt
        nf = len(self.force_dof)
        if self.model_load is not None:
            return self.model_load.take(n)
        if self.load == "sine":
            f = self.amp * np.sin(2 * np.pi * self.freq * t)[:, None] * np.ones(nf)
        elif self.load == "impulse":  # 5 ms half-sine pulse once per second
            ph = np.mod(t, 1.0)
            f = np.where(ph < 0.005, self.amp * np.sin(np.pi * ph / 0.005), 0.0)[:, None] \
                * np.ones(nf)
        elif self.load == "chirp":  # 0 -> frequency over 10 s, repeating
            tt = np.mod(t, 10.0)
            f = self.amp * np.sin(np.pi * self.freq / 10.0 * tt ** 2)[:, None] * np.ones(nf)
        else:  # random: white noise through a first-order low-pass at `frequency`
            w = self.rng.standard_normal((n, nf)) * self.amp
            # alpha = 1 - exp(-2 pi fc dt): one-pole smoothing coefficient
            alpha = 1.0 - np.exp(-2 * np.pi * max(self.freq, 1e-3) * self.dt)
            f = np.empty((n, nf))
            lp = self._lp
            for i in range(n):
                lp = lp + alpha * (w[i] - lp)
                f[i] = lp
            self._lp = lp
        return f

    def physical(self, n: int) -> np.ndarray:
        """Next ``n`` samples of the channels in physical units, shape (n, nch)."""
        fh = self.forces(self.k, n)
        if self._exc_pending is not None:  # rest, then the known excitation from here
            f, j, sub = self._exc_pending
            self._exc_pending = None
            self._exc = (self.k, f, j, sub)
            self.u[:], self.v[:], self.a[:] = 0.0, 0.0, 0.0
        out = np.empty((n, len(self.ch_dof)))
        fv = np.zeros(self.M.shape[0])
        for i in range(n):
            k = self.k + i
            e = None  # sample index within a running identification excitation
            if self._exc is not None:
                k0, f, j, sub = self._exc
                e = k - k0
                if e >= (f.size - 1) // sub + 1:  # over: the load resumes at the sample rate
                    self._exc, e = None, None
            fv[:] = 0.0
            if k == 0 or e == 0:  # at rest: initial acceleration from equilibrium
                if e == 0:
                    fv[self.force_dof[j]] = f[0]
                else:
                    fv[self.force_dof] += fh[i]
                # M a0 = f0 - C v0 - K u0
                self.a = np.linalg.solve(self.M, fv - self.C @ self.v - self.K @ self.u)
            elif e is not None:  # sub-stepped like the maps' training data
                h, Kinv = ((self.dt, self.Keff_inv) if sub == 1
                           else (self.dt / sub, self._Keff_inv_sub))
                for s in range(1, sub + 1):
                    fv[:] = 0.0
                    fv[self.force_dof[j]] = f[(e - 1) * sub + s]
                    self._step(fv, h, Kinv)
            else:  # sub-stepped, the load linear in between
                self._substeps(fh[i])
            self._f_prev = fh[i]
            st = (self.u, self.v, self.a)
            for c in range(len(self.ch_dof)):
                out[i, c] = st[self.ch_kind[c]][self.ch_dof[c]]
        self.k += n
        return out

    def _substeps(self, f_end) -> None:
        """One sample interval as :data:`MODEL_SUBSTEPS` Newmark steps, the forces linear
        from the previous sample's to ``f_end`` (Newmark at the sample rate lengthens a
        mode's period by ~(w dt)^2 / 12: 0.9 % at 52 Hz and 1 kHz, which the model check's
        band pairs see as a moved resonance), applied as the one linear map they compose
        to: ``x+ = A x + B0 f_prev + B1 f_end`` with ``x = (u, v, a)`` (:func:`sample_map`)."""
        if getattr(self, "_map", None) is None:
            self._map = sample_map(self.M, self.C, self.K, self.dt, self.beta, self.gamma,
                                   self.force_dof, MODEL_SUBSTEPS)
        A, B0, B1 = self._map
        f0 = getattr(self, "_f_prev", f_end)
        x = A @ np.concatenate([self.u, self.v, self.a]) + B0 @ f0 + B1 @ f_end
        n = self.M.shape[0]
        self.u, self.v, self.a = x[:n], x[n:2 * n], x[2 * n:]

    def _step(self, fv, h, Keff_inv) -> None:
        """One Newmark step of length ``h`` with the nodal load ``fv`` at its end."""
        r = internal_force(self.M, self.C, self.u, self.v, self.a, h, self.beta, self.gamma)
        # u+ = Keff^-1 (r + f+)   (paper 004 eq. 15a)
        u_new = Keff_inv @ (r + fv)
        v_new, a_new = update_rates(u_new, self.u, self.v, self.a, h, self.beta, self.gamma)
        self.u, self.v, self.a = u_new, v_new, a_new

    def volts(self, n: int) -> np.ndarray:
        """Next ``n`` samples as channel voltages, shape (n, nch) [V]."""
        y = self.physical(n)
        if self.noise > 0:
            if self._scale is None:
                s = y.std(axis=0)
                self._scale = np.where(s > 0, s, 1.0)
            y = y + self.noise * self._scale * self.rng.standard_normal(y.shape)
        v = y * self.sens + self.off
        if self.row_noise is not None and not self.noise_in_converter:
            v += self.row_noise * self.rng.standard_normal(v.shape)
        return v


class FileSource:
    """Channels' voltages from a measurement CSV (``time,<names>``, SI), repeated at the end
    only if ``loop`` is true."""

    def __init__(self, path, names, sensitivity, offset, loop=False):
        self.t, data, head = read_table(path)  # edge.csvio.CsvError (a ValueError) names it
        missing = [n for n in names if n not in head]
        if missing:
            raise ValueError(f"{path}: column {missing[0]!r} missing (header: {head})")
        self.y = data[:, [head.index(n) for n in names]]
        self.sens = np.asarray(sensitivity, float)
        self.off = np.asarray(offset, float)
        self.loop = loop
        self.k = 0

    def volts(self, n: int) -> np.ndarray:
        m = self.y.shape[0]
        if self.loop:
            idx = (self.k + np.arange(n)) % m
        else:
            idx = np.arange(self.k, min(self.k + n, m))
        self.k += len(idx)
        return self.y[idx] * self.sens + self.off


def sample_map(M, C, K, dt, beta, gamma, force_dof, sub: int):
    """``(A, B0, B1)``: ``sub`` Newmark steps of ``dt / sub`` (paper 004 eq. 14-15) with the
    nodal forces at ``force_dof`` linear from ``f0`` to ``f1`` over the interval, as one map
    ``x+ = A x + B0 f0 + B1 f1`` of ``x = (u, v, a)``: each step ``x_s = T x_(s-1) + g f_s``
    is linear, so ``A = T^sub``, ``B0 = sum_s T^(sub-s) g (1 - s/sub)``, ``B1 = sum_s
    T^(sub-s) g s/sub`` (T and g probed column by column)."""
    n, h = M.shape[0], dt / sub
    Kinv = np.linalg.inv(effective_stiffness(M, C, K, h, beta, gamma))

    def step(x, fv):
        u, v, a = x[:n], x[n:2 * n], x[2 * n:]
        u1 = Kinv @ (internal_force(M, C, u, v, a, h, beta, gamma) + fv)
        v1, a1 = update_rates(u1, u, v, a, h, beta, gamma)
        return np.concatenate([u1, v1, a1])

    eye, zero = np.eye(3 * n), np.zeros(n)
    T = np.column_stack([step(eye[:, i], zero) for i in range(3 * n)])
    g = np.column_stack([step(np.zeros(3 * n), np.eye(n)[d]) for d in force_dof])
    A, B0, B1 = np.eye(3 * n), np.zeros_like(g), np.zeros_like(g)
    for s in range(1, sub + 1):  # x_sub = T^sub x0 + sum_s T^(sub-s) g f_s
        A = T @ A
        B0, B1 = T @ B0 + g * (1 - s / sub), T @ B1 + g * (s / sub)
    return A, B0, B1


class InputSource:
    """Adapter for ``edge.hw.sim_ads1256``: ``volts(t_s) -> (9,)`` on AIN0..AIN7, AINCOM
    from a chunked source (sample and hold at the source's rate, from the first call on),
    and ``window_mean``, the chip's conversion of that staircase (exact, a few weights per
    conversion: :func:`edge.hw.ads1256_filter.grid_weights`)."""

    #: rows kept behind the newest: the longest conversion window (0.4 s at 2.5 SPS)
    KEEP_S = 0.41

    def __init__(self, source, rate: float, inputs: list[int], chunk: int = 1024,
                 seed: int = 0):
        self.src, self.rate, self.inputs = source, float(rate), list(inputs)
        # a source's sensor noise on the converted rows (what the estimator's R describes),
        # one draw per conversion, not averaged away by the chip's filter
        self.row_noise = getattr(source, "row_noise", None)
        if self.row_noise is not None:
            source.noise_in_converter = True
            self.noise_rng = np.random.default_rng([seed, 1])
        self.chunk = chunk
        self.keep = int(self.KEEP_S * self.rate) + 2
        self.k0 = 0  # sample index of buf[0]
        self.buf = np.zeros((0, len(inputs)))
        self.t0 = None
        self.out = np.zeros(9)

    def _fill(self, k: int) -> int:
        """Read chunks until sample ``k`` is buffered; the index into ``buf`` of ``k``
        (the last row once a file source is exhausted)."""
        while k >= self.k0 + self.buf.shape[0]:
            nxt = self.src.volts(self.chunk)
            if nxt.shape[0] == 0:  # file source exhausted: hold the last value
                k = self.k0 + self.buf.shape[0] - 1
                break
            keep = self.buf[-self.keep:]
            self.k0 += self.buf.shape[0] - keep.shape[0]
            self.buf = np.vstack([keep, nxt])
        return k - self.k0

    def volts(self, t_s: float) -> np.ndarray:
        if self.t0 is None:
            self.t0 = t_s
        i = self._fill(int((t_s - self.t0) * self.rate + 1e-6))
        i = min(max(i, 0), self.buf.shape[0] - 1)
        self.out[:] = 0.0
        if self.buf.shape[0]:
            self.out[self.inputs] = self.buf[i] + self._noise()
        return self.out

    def _noise(self):
        """One conversion's sensor noise per input (0 without a source noise)."""
        if self.row_noise is None:
            return 0.0
        return self.row_noise * self.noise_rng.standard_normal(self.row_noise.size)

    def window_mean(self, t_end_s: float, taps, inputs=None) -> np.ndarray:
        """``sum_i taps_i volts(t_end_s - i / F_MOD)`` of the staircase (rows before the
        first call's instant: the first row), every input (``inputs`` is ignored)."""
        if self.t0 is None:
            self.t0 = t_end_s
        first, w = grid_weights(taps, (t_end_s - self.t0) * self.rate + 1e-6,
                                self.rate / F_MOD, kind="hold")
        last = self._fill(first + w.size - 1)
        self.out[:] = 0.0
        if self.buf.shape[0]:
            idx = np.arange(first - self.k0, first - self.k0 + w.size)
            idx = np.minimum(np.maximum(idx, 0), max(0, min(last, self.buf.shape[0] - 1)))
            self.out[self.inputs] = w @ self.buf[idx] + self._noise()
        return self.out
