"""The bundle format's tables: every array field once, with its shape, its first schema
version and its meaning (:data:`FIELDS`, the smoother's :data:`KF_ARRAYS` and
:data:`KF_OPTIONAL`), and the limits the checks apply.

:mod:`edge.bundle_schema` assembles the format from them (its docstring tells the versions'
story, :func:`edge.bundle_schema.field_table` renders them for docs/bundle.md) and
:mod:`edge.bundle_validate` checks a file's arrays against them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Largest window accepted: the estimator's window matrices grow with L^2.
MAX_WINDOW = 512
#: Most start-up rows accepted (``kf_startup_var``): 30 s at 10 kHz.
MAX_STARTUP_ROWS = 300_000
#: Longest model-check window (``kf_nis_window``) in seconds: its rings are allocated at load
MAX_NIS_WINDOW_S = 600.0


@dataclass(frozen=True)
class Field:
    """One array of the ``.npz``: name, dtype kind(s), shape, first schema version, meaning."""

    name: str
    dtype: str
    shape: str
    since: int
    doc: str

    @property
    def ndim(self) -> int:
        return 0 if self.shape == "()" else self.shape.count(",") + (
            0 if self.shape.endswith(",)") else 1)


def _table(text: str) -> tuple:
    """Fields from rows ``name | dtype kinds | shape | since | meaning``."""
    rows = (line.split("|", 4) for line in text.strip().splitlines())
    return tuple(Field(n.strip(), d.strip(), sh.strip(), int(v), doc.strip())
                 for n, d, sh, v, doc in rows)


#: Required fields (n reduced DOFs, nch channels, nf forces, nout outputs, nr report rows);
#: dtype kinds: i integer, f float, U string.
FIELDS = _table("""
schema_version       | i | ()        | 1 | format version (`SCHEMA_VERSION`)
meta                 | U | ()        | 1 | JSON: names, units, nodes, DOFs of channels/forces/outputs, ...
M                    | f | (n, n)    | 1 | reduced mass, measured first (paper eq. 8-11) [kg]
C                    | f | (n, n)    | 1 | reduced damping [N s/m]
K                    | f | (n, n)    | 1 | reduced stiffness [N/m]
dt                   | f | ()        | 1 | sample interval [s]
beta                 | f | ()        | 1 | Newmark beta
gamma                | f | ()        | 1 | Newmark gamma
alpha                | f | ()        | 1 | Tikhonov parameter (paper eq. 20-24)
window               | i | ()        | 1 | fixed-lag window L (smoother: lag + 1)
discretization       | U | ()        | 3 | `newmark` or `foh` (schema 1-2: meta, default newmark)
regularization       | U | ()        | 3 | `tikhonov0` or `tikhonov1` (schema 1-2: meta, default tikhonov0)
channel_dof          | i | (nch,)    | 1 | reduced coordinate each channel measures
channel_kind         | i | (nch,)    | 1 | index in `edge.kinds.SIGNAL_KINDS`
channel_weight       | f | (nch,)    | 1 | least-squares weight (1 / noise variance)
force_dof            | i | (nf,)     | 1 | reduced coordinate each identified force acts on
output_rows          | f | (nout, n) | 1 | virtual output = row @ (u, v or a)
output_kind          | i | (nout,)   | 1 | index in `edge.kinds.SIGNAL_KINDS`
report_freqs_full    | f | (nr,)     | 1 | reduction report: full-model frequencies [Hz]
report_freqs_reduced | f | (nr,)     | 1 | reduction report: reduced-model frequencies [Hz]
report_eig_error     | f | (nr,)     | 1 | reduction report: eigenvalue error [%]
chain_converter      | U | ()        | 7 | measurement chain: `ideal` (point samples), `ads1256` or `daq`; schema <= 6: ideal
chain_drate          | f | ()        | 7 | the converter's data rate [SPS] (0 for ideal)
chain_mode           | U | ()        | 7 | `continuous` or `cycle` (multiplexer cycling over the channels)
chain_offset         | f | (nch,)    | 7 | each channel's conversion window ends this long before the row's time stamp [s]
chain_filter         | f | (2,)      | 7 | `daq`: cut-off [Hz] and group delay [s] of its linear-phase anti-alias FIR ([0, 0] otherwise)
chain_highpass_hz    | f | (nch,)    | 8 | each sensor's first-order high-pass corner [Hz] before the converter (0: none; schema <= 7: none)
chain_average_s      | f | (nch,)    | 8 | each sensor's moving-average window [s] (0: none)
chain_drift          | f | (nch,)    | 8 | each sensor's random-walk offset intensity [unit/sqrt(s)] (0: none)
chain_markov         | i | ()        | 10 | 1: the Tikhonov estimator's Markov parameters are the conversions' (the converter's taps and offsets through the continuous model); 0: point samples' (schema <= 9: 0)
content_hash         | U | ()        | 1 | sha256 over every other array (name, dtype, shape, bytes)
""")

#: Smoother gains (schema >= 2, only when ``meta["estimator"]["method"] == "smoother"``),
#: stored as ``kf_<name>``; ns states, nq = nf + nout, nb model-check bands.
KF_ARRAYS = _table("""
A              | f | (ns, ns)     | 2 | state transition
H              | f | (nch, ns)    | 2 | measurement matrix
K              | f | (ns, nch)    | 2 | steady-state filter gain
Cq             | f | (nq, ns)     | 2 | forces and outputs from the state
G              | f | (L, nq, nch) | 2 | fixed-lag smoother gains
Sinv           | f | (nch, nch)   | 2 | inverse innovation covariance
std            | f | (nq,)        | 2 | standard deviation of each force and output [SI]
nis_window     | i | ()           | 2 | model check window [samples], at most 10 min
nis_threshold  | f | ()           | 2 | model check threshold
Wt             | f | (nch, nch)   | 2 | innovation whitening
band_ba        | f | (nb, 5)      | 2 | model-check band filters
band_gain      | f | (nb,)        | 2 | model-check band gains
band_threshold | f | (nb,)        | 2 | model-check band thresholds
band_hz        | f | (nb, 2)      | 2 | model-check band edges [Hz]
""")
#: Optional smoother arrays (schema >= 4): the load-level grid (nl levels) and the lower
#: model-check threshold. A smoother bundle without them runs at its design level and flags
#: only too large innovations.
KF_OPTIONAL = _table("""
nis_threshold_low | f | ()                | 4 | model check lower threshold (too small innovations)
level_grid        | f | (nl,)             | 4 | load levels: factors of the designed force RMS, increasing
level_K           | f | (nl, ns, nch)     | 4 | filter gain at each level
level_G           | f | (nl, L, nq, nch)  | 4 | fixed-lag gains at each level
level_Sinv        | f | (nl, nch, nch)    | 4 | inverse innovation covariance at each level
level_Wt          | f | (nl, nch, nch)    | 4 | innovation whitening at each level
level_std         | f | (nl, nq)          | 4 | standard deviation of each force and output at each level
level_nis         | f | (nl, nl)          | 4 | mean NIS per channel at level a when the load is at level b (schema 4-6: tr(S_a^-1 S_b) / nch; 7: exact)
startup_var       | f | (N, nq)           | 7 | start-up: each row's error variance above the steady std^2 (from the first sample and a reset, until within 1 %)
std_scale         | f | (nq,)             | 9 | each force's and output's stated std is multiplied by it (> 0): the model's own error, measured on full-model calibration runs drawn from the smoother's own load model (schema <= 8: 1)
track_innov       | f | (nl, 4)           | 7 | load levels that set the load-to-noise ratio (noise a property of the sensor): the innovations at level a per unit load power and per unit noise, mean NIS (tq, tr) and lag-1 product (cq, cr) per channel; the device tracks the noise scale too
track_var         | f | (nl, 2, nq)       | 7 | with track_innov: error variance of each force and output under the gains of level a, per unit load power and per unit noise
alt_A             | f | (na, na)          | 8 | chain check: the state transition of the steady filter of an alternative measurement chain (ideal for a converter, the ADS1256 for point samples; meta chain_check names it)
alt_H             | f | (nch, na)         | 8 | chain check: its measurement matrix
alt_K             | f | (na, nch)         | 8 | chain check: its steady filter gain
alt_Sinv          | f | (nch, nch)        | 8 | chain check: its inverse innovation covariance
hy_onnx           | u | (nbytes,)         | 5 | hybrid: the correction network g (ONNX, float64, input `s` (1, ni), output `g` (1, ng))
hy_S              | f | (ni, ns)          | 5 | hybrid: network input s = S x (state x_k|k-1)
hy_Bg             | f | (ns, ng)          | 5 | hybrid: x_k+1 += Bg g (zero-order hold)
hy_Dg             | f | (nch, ng)         | 5 | hybrid: channels y_k -= Dg g (acceleration channels)
hy_Cqg            | f | (nq, ng)          | 5 | hybrid: forces and outputs += Cqg g
hy_lo             | f | (ni,)             | 5 | hybrid: trained envelope of s, lower bound
hy_hi             | f | (ni,)             | 5 | hybrid: trained envelope of s, upper bound
hy_direct         | f | (2,)              | 6 | hybrid: direct terms see w0 g_k + w1 g_k-1 (schema 5: (1, 0))
hy_guard          | i | ()                | 10 | hybrid: outside the trained envelope 1 = the network's input held at the envelope's bound (saturated), 0 = the correction off (schema <= 9: 0)
""")
#: ``{name: ndim}`` of the smoother arrays (without the ``kf_`` prefix)
KF_FIELDS = {f.name: f.ndim for f in KF_ARRAYS + KF_OPTIONAL}
#: Optional arrays stored as ``x_<name>`` (covered by the hash).
EXTRAS_DOC = "extras: inverse maps (ONNX bytes), parametric parts, ... (`Bundle.extras`)"


def required(version: int) -> tuple:
    """The required fields of schema ``version``."""
    return tuple(f for f in FIELDS if f.since <= version)

