"""``vsense-edge replay``: recorded measurements through the exact edge kernel.

Input: a measurement CSV (``time,<channel names>`` in SI units, as written by
``vsense-offline simulate``) or a recorder file/directory of the daemon. Channels are matched
to the bundle by name (extra columns are ignored, a missing one is an error). Output: a CSV
``time,<force names>,<output names>,flags`` where ``time`` is the time of the sample each
estimate describes (the fixed-lag delay is already removed); the rows before the first
estimate are omitted (start-up rows keep their warm-up flag). When
the estimator states its uncertainty (the smoother), ``<name>_std`` columns (standard
deviation of each force and output, same units) come before ``flags``.

A recording directory holds one run per daemon start (each with sequence numbers from 0,
:func:`edge.daemon.vsr.read_runs`): the runs are replayed one after another, oldest first,
each with a new estimator (reset between runs, warm-up rows omitted again), their rows
appended in that order; ``--run K`` replays only the K-th. Files cut by a power cut or a
kill (empty, a cut header, a partial last record) are skipped or trimmed with a warning
naming the file.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import numpy as np

from edge.bundle import Bundle, BundleError
from edge.csvio import CsvError, read_table, write_table
from edge.daemon.vsr import RecordingError, read_runs, replay_input
from edge.estimator import FLAG_WARMUP, Estimator, EstimatorError
from edge.estimator.band_pairs import SHAPE_REASON
from edge.flags import FLAG_MODEL_SUSPECT, FLAG_OVERFLOW


class ReplayError(ValueError):
    """Unreadable or mismatching input."""


def read_measurement_csv(path):
    """``(t (n,), Y (n, m), names)`` from a ``time,<names>`` CSV; errors name file and line."""
    try:
        return read_table(path)
    except CsvError as exc:
        raise ReplayError(str(exc)) from None


def load_inputs(path, run: int | None = None, warn=None) -> list[tuple]:
    """Measurement CSV or daemon recording -> ``[(label, t, Y, names)]``: one entry for a
    CSV, one per run (oldest first) for a recording, or only run ``run`` (1-based).
    ``warn(text)`` gets what was skipped or trimmed, naming the file."""
    if not str(path):  # Path("") is "." (a directory)
        raise ReplayError("the measurement file name is empty")
    p = Path(path)
    if p.is_dir() or p.suffix == ".vsr":
        runs = read_runs(p, "raw", warn)
        if run is not None:
            if not 1 <= run <= len(runs):
                raise ReplayError(f"{p}: --run {run}: it holds {len(runs)} run(s)")
            runs = [runs[run - 1]]
        return [(f"{p} {r.describe()}", *replay_input(r.recording)) for r in runs]
    if run is not None and run != 1:
        raise ReplayError(f"{p}: --run {run}: a measurement CSV is one run")
    return [(str(p), *read_measurement_csv(p))]


def load_input(path):
    """Measurement CSV or a recording of one run -> ``(t, Y, names)``."""
    parts = load_inputs(path)
    if len(parts) > 1:
        raise ReplayError(f"{path}: {len(parts)} runs; replay them with load_inputs")
    return parts[0][1:]


def run_replay(bundle: Bundle, t, Y, names, source="input", with_std: bool = False,
               checks: list | None = None):
    """Run the estimator; returns (t_est (m,), F (m, nf), Z (m, nout), flags (m,)) and, with
    ``with_std``, the standard deviation of each row's columns ``(m, nf + nout)`` (the one the
    estimator stated for it: it follows the load's level) or None. ``checks``: the
    estimator's model check at the end (a smoother's ``model_check()``) is appended to it."""
    missing = [c.name for c in bundle.channels if c.name not in names]
    if missing:
        raise ReplayError(f"{source}: channel column(s) {missing} of bundle "
                          f"{bundle.bundle_id} not found (columns: {names})")
    cols = [names.index(c.name) for c in bundle.channels]
    Y = np.ascontiguousarray(Y[:, cols], dtype=np.float64)
    if len(t) > 1:
        dts = np.diff(t)
        if np.any(dts <= 0):
            raise ReplayError(f"{source}: time column is not strictly increasing")
        if abs(np.median(dts) - bundle.dt) > 1e-3 * bundle.dt:
            raise ReplayError(f"{source}: sample interval {np.median(dts):.6g} s does not match "
                              f"the bundle's {bundle.dt:.6g} s")
    est = Estimator(bundle)
    F, Z, flags, S = est.run_std(Y)  # S: the std each row was stated with (level tracking)
    d = est.delay
    if checks is not None and hasattr(est, "model_check"):
        checks.append(est.model_check())
    # rows before the estimator's first output (NaN, warm-up) are omitted; the rows of its
    # start-up (values, the std still converging) are kept with their warm-up flag
    nan_row = ~(np.isfinite(F).all(axis=1) & np.isfinite(Z).all(axis=1))
    keep = ~(((flags & FLAG_WARMUP) != 0) & nan_row)
    # row j describes sample j - d: stamp it with that sample's time
    t_est = np.full(len(t), np.nan)
    t_est[d:] = t[: len(t) - d]
    if with_std:
        return t_est[keep], F[keep], Z[keep], flags[keep], None if S is None else S[keep]
    return t_est[keep], F[keep], Z[keep], flags[keep]


def write_estimates(out, t, F, Z, flags, force_names, output_names, std=None) -> None:
    """``time,<forces>,<outputs>[,<forces>_std,<outputs>_std],flags`` to a path or an open
    text file (``std``: None, or the standard deviation of each column, ``(nf + nout,)``, or
    of each row's columns, ``(m, nf + nout)``)."""
    data = np.hstack([F, Z])
    names = [*force_names, *output_names]
    if std is not None:
        data = np.hstack([data, np.broadcast_to(np.asarray(std, float), data.shape)])
        names += [f"{x}_std" for x in names]
    write_table(out, t, data, names, extra=flags, extra_name="flags")


def _replay_runs(bundle: Bundle, parts: list[tuple]):
    """Each run through its own estimator (:func:`run_replay`), rows appended in order."""
    outs = []
    for label, t, Y, names in parts:
        if len(t) == 0:
            print(f"vsense-edge replay: warning: {label}: no samples; skipped", file=sys.stderr)
            continue
        checks = []
        outs.append(run_replay(bundle, t, Y, names, source=label, with_std=True,
                               checks=checks))
        mc = checks[0] if checks else None  # None: an estimator without a model check
        chain = mc.get("chain") if isinstance(mc, dict) else None
        if chain and chain["suspect"]:  # said here: a wrong chain looks white otherwise
            print(f"vsense-edge replay: warning: {label}: model check: "
                  + next(r for r in mc["reasons"] if "measurement chain" in r),
                  file=sys.stderr)
        # a load of another shape: the std is wrong while the NIS looks right (at the end)
        shape = [r for r in (mc or {}).get("reasons", ()) if r.startswith(SHAPE_REASON)]
        if shape:
            print(f"vsense-edge replay: warning: {label}: model check at its end: {shape[0]}",
                  file=sys.stderr)
    if not outs:
        raise ReplayError(f"{parts[0][0] if parts else 'input'}: no samples to replay")
    if len(parts) > 1:
        print(f"vsense-edge replay: {len(outs)} runs replayed one after another (a new "
              f"estimator for each): {'; '.join(p[0] for p in parts)}", file=sys.stderr)
    std = [o[4] for o in outs]
    return (*(np.concatenate([o[k] for o in outs]) for k in range(4)),
            None if any(x is None for x in std) else np.concatenate(std))


def replay(input_path, bundle_path, out_path=None, run: int | None = None) -> int:
    """CLI body: returns the process exit code (0 ok, 2 -o not writable, 3 bad bundle, 6 bad
    input)."""
    try:
        bundle = Bundle.load(bundle_path)
    except BundleError as exc:
        print(f"vsense-edge replay: {exc}", file=sys.stderr)
        return 3

    def warn(text):
        print(f"vsense-edge replay: warning: {text}", file=sys.stderr)

    try:
        parts = load_inputs(input_path, run, warn)
        t_est, F, Z, flags, std = _replay_runs(bundle, parts)
    except EstimatorError as exc:  # the bundle's estimator cannot be built: a bad bundle
        print(f"vsense-edge replay: {exc}", file=sys.stderr)
        return 3
    except (ReplayError, RecordingError, ValueError, OSError) as exc:
        print(f"vsense-edge replay: {exc}", file=sys.stderr)
        return 6
    fnames = [f.name for f in bundle.forces]
    onames = [o.name for o in bundle.outputs]
    over = np.flatnonzero(flags & FLAG_OVERFLOW)
    if over.size:  # flagged in the output too; said here so that nobody misses it
        print(f"vsense-edge replay: warning: {over.size} of {flags.size} estimates are not "
              f"finite (flag {FLAG_OVERFLOW}, overflow) from t = {t_est[over[0]]:.6g} s on: "
              f"an input value of {input_path} or a value of {bundle_path} is far out of "
              f"range", file=sys.stderr)
    _say_model_suspect(t_est, flags)
    if out_path is None:
        write_estimates(sys.stdout, t_est, F, Z, flags, fnames, onames, std)
    else:
        # a device or pipe (-o /dev/null) is written directly, never renamed over
        special = os.path.exists(out_path) and not os.path.isfile(out_path) \
            and not os.path.isdir(out_path)
        tmp = str(out_path) if special else f"{out_path}.tmp"
        try:
            with open(tmp, "w", newline="") as fh:
                write_estimates(fh, t_est, F, Z, flags, fnames, onames, std)
            if not special:
                os.replace(tmp, out_path)
        except OSError as exc:  # -o a directory, an unwritable place, a full disk
            with contextlib.suppress(OSError):
                if not special:
                    os.unlink(tmp)
            print(f"vsense-edge replay: -o {out_path}: cannot write the estimates "
                  f"({exc.strerror or exc})", file=sys.stderr)
            return 2
        print(f"wrote {len(t_est)} estimates (delay {bundle.window - 1} samples, stamped with "
              f"their sample time) to {out_path}",
              file=sys.stderr)
    return 0


def _say_model_suspect(t, flags) -> None:
    """How many estimates carry the model check's flag (:data:`FLAG_MODEL_SUSPECT`: the
    innovations say the model or the declared load does not fit the records), and when: a
    user reading only the estimates' values would not see it (the daemon publishes it in its
    status)."""
    bad = np.flatnonzero(flags & FLAG_MODEL_SUSPECT)
    if bad.size:
        print(f"vsense-edge replay: warning: {bad.size} of {flags.size} estimates carry the "
              f"model check's flag (flag {FLAG_MODEL_SUSPECT}, model suspect), between t = "
              f"{t[bad[0]]:.6g} and {t[bad[-1]]:.6g} s: the records do not look like the "
              f"bundle's model and load there, and the stated std may not hold",
              file=sys.stderr)
