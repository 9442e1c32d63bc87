"""Score an estimate file against a truth file: FDE (band and full), normalised RMS error
(RMS(estimate - truth) / std(truth), time domain, full band), RMS error, correlation.

``vsense-offline score OUTPUT TRUTH [--band F0 FMAX]`` calls :func:`main`.

* OUTPUT: estimates as written by replay, header ``time,<force names>,<output names>,flags``
  (the ``flags`` column is optional).
* TRUTH: header ``time,<names>``, e.g. the truth file of ``offline/simulate.py``; it may hold
  more columns and a finer, commensurate time grid than OUTPUT.

With ``<name>_std`` columns (the stated standard deviation of the smoother, as written by
replay) each such column also gets its honesty: the 1-sigma coverage, the fraction of scored
rows with ``|estimate - truth| <= std`` (68.3 % for a Gaussian error whose std is stated
exactly; far below: the std is too narrow, far above: too wide), and ``std/error``, the RMS of
the stated std over the RMS error (1 when the std is honest on average).

Every data column of OUTPUT (or the ones chosen with ``--columns``) must exist in TRUTH, and
every OUTPUT time must have a TRUTH time within 1e-3 of the OUTPUT sample interval; otherwise
a :class:`ScoreError` names the file and the column or time. Rows with flags bit 1 (warm-up)
or a NaN in a scored column of either file are always skipped and counted: the estimator
holds the warm-up flag until its stated std has converged, so the default (``skip = 0``)
leaves out the estimator's convergence. ``--skip SECONDS`` leaves out the first SECONDS as
well, whatever the flags (e.g. the transient of a record simulated from rest, or estimates
from another tool without a flags column). Skipped rows at the start
and end are dropped; skipped rows inside the record are set to zero in both signals for the
FFT (the time grid stays uniform, and such rows add nothing to the FDE numerator) and left
out of the RMS error and correlation.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field

import numpy as np

from edge.csvio import CsvError
from edge.csvio import read_table as _read
from edge.flags import FLAG_WARMUP
from offline.metrics import correlation, fde, rms_error

__all__ = ["ScoreError", "ColumnScore", "ScoreTable", "read_table", "score", "main"]


class ScoreError(ValueError):
    """An input file is missing, malformed, or does not line up with the other one."""


@dataclass
class ColumnScore:
    """Scores of one column (units of that column for ``rms``; ``nrmse`` = ``rms`` /
    std(truth) over the scored rows, dimensionless, full band)."""

    name: str
    fde_band: float
    fde_full: float
    nrmse: float
    rms: float
    corr: float
    coverage: float | None = None   # fraction of rows with |estimate - truth| <= stated std
    std_ratio: float | None = None  # RMS(stated std) / RMS(estimate - truth)


@dataclass
class ScoreTable:
    """Result of :func:`score`.

    Attributes
    ----------
    rows : list of ColumnScore
    band_label : str
        What ``fde_band`` was computed over ("0-200 Hz", or "full spectrum (...)").
    full_label : str
    dt : float
        Sample interval of the estimate file [s].
    n_rows, n_used : int
        Rows in the estimate file; rows scored.
    n_warmup, n_nan : int
        Rows skipped for the warm-up flag; for a NaN (not counting warm-up rows).
    n_start : int
        Rows skipped because they lie within ``skip`` seconds of the first row, or at
        least ``until`` seconds after it.
    n_interior : int
        Skipped rows inside the record (zeroed for the FFT, see the module docstring).
    """

    output_csv: str
    truth_csv: str
    rows: list = field(default_factory=list)
    band_label: str = ""
    full_label: str = ""
    dt: float = 0.0
    n_rows: int = 0
    n_used: int = 0
    n_warmup: int = 0
    n_nan: int = 0
    n_interior: int = 0
    n_start: int = 0

    @property
    def one_band(self) -> bool:
        """No ``--band``: the band's FDE is the full spectrum's."""
        return self.band_label == self.full_label

    def format(self) -> str:
        """A plain-text table."""
        lines = [f"score: {self.output_csv} vs {self.truth_csv}",
                 f"rows: {self.n_rows} in output, {self.n_used} scored, skipped "
                 f"{self.n_warmup} warm-up, {self.n_nan} NaN"
                 + (f", {self.n_start} outside the window (--skip / --until)"
                    if self.n_start else "")
                 + (f" ({self.n_interior} inside the record, zeroed for the FFT)"
                    if self.n_interior else ""),
                 (f"FDE over {self.band_label}; " if not self.one_band else "")
                 + f"full: {self.full_label}; dt = {self.dt:g} s"]
        w = max([len("column")] + [len(r.name) for r in self.rows])
        # without --band the band is the full spectrum: one FDE column, not the same twice
        hb = "" if self.one_band else f"FDE {self.band_label}"
        wb = max(len(hb), 10)
        honest = any(r.coverage is not None for r in self.rows)
        lines.append(f"{'column':<{w}}  " + (f"{hb:>{wb}}  " if hb else "") + f"{'FDE full':>10}  "
                     f"{'NRMSE':>8}  {'RMS error':>11}  {'corr':>7}"
                     + (f"  {'1-sigma cov.':>12}  {'std/error':>9}" if honest else ""))
        for r in self.rows:
            ln = (f"{r.name:<{w}}  " + (f"{r.fde_band:>{wb}.4f}  " if hb else "")
                  + f"{r.fde_full:>10.4f}  {r.nrmse:>8.4f}  {r.rms:>11.4g}  {r.corr:>7.4f}")
            if honest:
                ln += (f"  {100 * r.coverage:>11.1f}%  {r.std_ratio:>9.3g}"
                       if r.coverage is not None else f"  {'-':>12}  {'-':>9}")
            lines.append(ln)
        lines.append("NRMSE = RMS(estimate - truth) / std(truth), time domain, full band")
        if honest:
            lines.append("1-sigma cov. = share of rows with |estimate - truth| <= the stated "
                         "<name>_std (68.3 % for an honest Gaussian std); std/error = "
                         "RMS(stated std) / RMS(estimate - truth) (1 = honest)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------- reading
def read_table(path) -> tuple[list, np.ndarray]:
    """Read a numeric CSV with a header row (:func:`edge.csvio.read_table`).

    Returns
    -------
    names : list of str, the header
    data : ndarray, shape (nrows, len(names)), float64 ("nan" allowed)

    Raises :class:`ScoreError` naming the file (and line) when it is missing, empty,
    ragged or not numeric.
    """
    try:
        t, data, names = _read(path, min_rows=2)
    except CsvError as exc:
        raise ScoreError(str(exc)) from None
    return ["time", *names], np.column_stack([t, data])


# ---------------------------------------------------------------------------- scoring
def score(output_csv, truth_csv, band=None, columns=None, skip: float = 0.0,
          until: float | None = None, warmup: bool = False) -> ScoreTable:
    """Compare an estimate file with a truth file column by column.

    Parameters
    ----------
    output_csv : path
        Estimates, ``time,<names>[,flags]``.
    truth_csv : path
        Reference, ``time,<names>``; same names, commensurate times.
    band : tuple (f0, fmax) [Hz], optional
        Band of the FDE column (the full-spectrum FDE is always reported too).
    columns : list of str, optional
        Columns to score (default: every data column of ``output_csv``).
    skip : float
        Seconds from the first row of ``output_csv`` left out (rows before
        ``time[0] + skip``): the estimator's start-up, which a record simulated from rest
        (a step of the load at t = 0 in every mode) or a replay started on a vibrating
        structure contains, and which the stationary accuracy limit does not.
    until : float, optional
        Seconds from the first row after which rows are left out (with ``skip``: a window,
        e.g. ``until = 1`` the first second).
    warmup : bool
        Score the rows flagged warm-up too (the stated std's honesty during start-up).

    Returns
    -------
    ScoreTable
    """
    out_csv, tru_csv = str(output_csv), str(truth_csv)
    en, E = read_table(out_csv)
    tn, T = read_table(tru_csv)
    columns = _columns(en, tn, columns, out_csv, tru_csv)
    te, tt = E[:, 0], T[:, 0]
    dt = _uniform_dt(te, tt, out_csv, tru_csv)
    j = _truth_rows(te, tt, 1e-3 * dt, out_csv, tru_csv)
    Ee = E[:, [en.index(c) for c in columns]]
    Tt = T[j][:, [tn.index(c) for c in columns]]
    flags = E[:, en.index("flags")] if "flags" in en else np.zeros(len(E))
    warm, nan, start = _left_out(te, flags, Ee, Tt, skip, 1e-3 * dt, until)
    warm = warm & (not warmup)
    table = ScoreTable(output_csv=out_csv, truth_csv=tru_csv, dt=dt, n_rows=len(E),
                       n_warmup=int(warm.sum()), n_nan=int((nan & ~warm).sum()),
                       n_start=int((start & ~warm & ~nan).sum()))
    left_out = warm | nan | start
    keep_idx = np.flatnonzero(~left_out)
    if keep_idx.size < 2:
        raise ScoreError(f"{out_csv}: fewer than 2 rows left after skipping "
                         f"{table.n_warmup} warm-up, {table.n_nan} NaN and {table.n_start} "
                         "start rows")
    table.n_used = int(keep_idx.size)
    table.n_interior = int(left_out[keep_idx[0]:keep_idx[-1] + 1].sum())
    r_full, r_band = _fdes(Ee, Tt, left_out, keep_idx, dt, band)
    table.full_label, table.band_label = r_full.label, r_band.label
    table.rows = _column_scores(columns, Ee[keep_idx], Tt[keep_idx], r_band, r_full)
    for i, c in enumerate(columns):  # the stated std's honesty, where a std column is given
        if f"{c}_std" in en:
            table.rows[i].coverage, table.rows[i].std_ratio = _honesty(
                E[keep_idx, en.index(f"{c}_std")], Ee[keep_idx, i] - Tt[keep_idx, i],
                out_csv, c)
    return table


def _columns(en: list, tn: list, columns, out_csv: str, tru_csv: str) -> list:
    """The columns to score: ``columns``, else every data column of the estimates (not
    time, flags or a ``<name>_std`` column: the smoother's uncertainty is not an estimate);
    each must exist in both files (ScoreError naming the file and column)."""
    data_cols = [n for n in en if n not in ("time", "flags")]
    data_cols = [n for n in data_cols if not (n.endswith("_std") and n[:-4] in data_cols)]
    if columns is None:
        columns = data_cols
    else:
        columns = list(columns)
        for c in columns:
            if c not in en:
                raise ScoreError(f"{out_csv}: column {c!r} is missing (has: {', '.join(en)})")
    if not columns:
        raise ScoreError(f"{out_csv}: no data columns to score besides time/flags")
    for c in columns:
        if c not in tn:
            raise ScoreError(f"{tru_csv}: column {c!r} is missing (has: {', '.join(tn)})")
    return columns


def _uniform_dt(te: np.ndarray, tt: np.ndarray, out_csv: str, tru_csv: str) -> float:
    """The estimates' sample interval (the median step; every step within 1e-3 of it), the
    truth's times strictly increasing; ScoreError naming the file and row otherwise."""
    if not (np.all(np.isfinite(te)) and np.all(np.isfinite(tt))):
        raise ScoreError(f"{out_csv if not np.all(np.isfinite(te)) else tru_csv}: "
                         "non-finite value in column 'time'")
    d = np.diff(te)
    dt = float(np.median(d))
    if dt <= 0 or np.any(np.abs(d - dt) > 1e-3 * dt):
        i = int(np.argmax(np.abs(d - dt))) if dt > 0 else 0
        raise ScoreError(f"{out_csv}: times are not uniformly spaced (dt {dt:g} s, row {i + 2} "
                         f"to {i + 3} steps {d[i]:g} s)")
    if np.any(np.diff(tt) <= 0):
        raise ScoreError(f"{tru_csv}: times are not strictly increasing")
    return dt


def _truth_rows(te: np.ndarray, tt: np.ndarray, tol: float, out_csv: str,
                tru_csv: str) -> np.ndarray:
    """Index of the truth row nearest each estimate time; every one within ``tol`` (else
    ScoreError naming the first estimate time without a truth row)."""
    j = np.clip(np.searchsorted(tt, te), 1, len(tt) - 1)
    j = np.where(np.abs(tt[j - 1] - te) <= np.abs(tt[j] - te), j - 1, j)
    miss = np.abs(tt[j] - te) > tol
    if np.any(miss):
        i = int(np.flatnonzero(miss)[0])
        raise ScoreError(f"{tru_csv}: no row at time {te[i]:.9g} s of {out_csv} (row {i + 2}); "
                         f"times do not line up (truth covers {tt[0]:g}..{tt[-1]:g} s)")
    return j


def _left_out(te, flags, Ee, Tt, skip: float, tol: float, until=None) -> tuple:
    """Boolean masks of the rows left out: ``(warm-up flag, NaN in a scored column of either
    file, within skip seconds of the first row or at least until seconds after it)``."""
    if not (np.isfinite(skip) and skip >= 0):
        raise ScoreError(f"skip must be a number of seconds >= 0, got {skip!r}")
    if until is not None and not (np.isfinite(until) and until > skip):
        raise ScoreError(f"until must be a number of seconds > skip ({skip:g}), got "
                         f"{until!r}")
    warm = (np.nan_to_num(flags).astype(np.int64) & FLAG_WARMUP) != 0
    nan = ~np.all(np.isfinite(Ee), axis=1) | ~np.all(np.isfinite(Tt), axis=1)
    start = te < te[0] + skip - tol
    if until is not None:  # the window's end: counted with the start rows (n_start)
        start |= te >= te[0] + until - tol
    return warm, nan, start


def _fdes(Ee, Tt, left_out, keep_idx, dt: float, band) -> tuple:
    """FDE results ``(full, band)`` of the scored span: the rows from the first to the last
    kept one, the left-out rows inside it zeroed in both signals (the grid stays uniform)."""
    lo, hi = keep_idx[0], keep_idx[-1] + 1
    seg_skip = left_out[lo:hi, None]
    Es = np.where(seg_skip, 0.0, Ee[lo:hi])
    Ts = np.where(seg_skip, 0.0, Tt[lo:hi])
    r_full = fde(Es, Ts, dt)
    return r_full, (fde(Es, Ts, dt, band=band) if band is not None else r_full)


def _column_scores(columns, Ek, Tk, r_band, r_full) -> list:
    """One :class:`ColumnScore` per column from the kept rows ``Ek``, ``Tk`` and the FDE
    results (without the std's honesty)."""
    rms = np.atleast_1d(rms_error(Ek, Tk))
    # normalised RMS error = RMS(estimate - truth) / std(truth) (full band, time domain)
    sd = np.atleast_1d(np.std(Tk, axis=0))
    nrmse = np.where(sd > 0, rms / np.where(sd > 0, sd, 1.0), np.inf)
    cor = np.atleast_1d(correlation(Ek, Tk))
    fb, ff = np.atleast_1d(r_band.value), np.atleast_1d(r_full.value)
    return [ColumnScore(name=c, fde_band=float(fb[i]), fde_full=float(ff[i]),
                        nrmse=float(nrmse[i]), rms=float(rms[i]), corr=float(cor[i]))
            for i, c in enumerate(columns)]


def _honesty(std: np.ndarray, err: np.ndarray, path: str, name: str) -> tuple:
    """1-sigma coverage (share of rows with ``|err| <= std``) and RMS(std) / RMS(err) of
    the scored rows; a NaN or negative std is an error naming the file and column."""
    if not np.all(np.isfinite(std)) or np.any(std < 0):
        raise ScoreError(f"{path}: column '{name}_std' has a NaN or negative std on a scored "
                         "row")
    cover = float(np.mean(np.abs(err) <= std))
    rms_err = float(np.sqrt(np.mean(err ** 2)))
    ratio = float(np.sqrt(np.mean(std ** 2)) / rms_err) if rms_err > 0 else float("inf")
    return cover, ratio


# -------------------------------------------------------------------------------- CLI
def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Arguments of ``vsense-offline score`` (adds to ``parser`` when given)."""
    p = parser or argparse.ArgumentParser(
        prog="vsense-offline score",
        description="Compare an estimate CSV with a truth CSV, per column: the normalised RMS "
                    "error (RMS(estimate - truth) / std(truth)), the frequency-domain error "
                    "FDE (sum |E - T| / sum (|E| + |T|) over the spectrum, Oh et al. eq. 33), "
                    "the RMS error and the correlation; with <name>_std columns the 1-sigma "
                    "coverage and stated-std / actual-error ratio (docs/glossary.md).")
    p.add_argument("output", help="estimate CSV: time,<names>,flags")
    p.add_argument("truth", help="truth CSV: time,<names>")
    p.add_argument("--band", nargs=2, type=float, metavar=("F0", "FMAX"),
                   help="frequency band of the FDE column [Hz] (full spectrum also shown)")
    p.add_argument("--columns", help="comma-separated columns to score (default: all)")
    p.add_argument("--skip", type=float, default=0.0, metavar="SECONDS",
                   help="also leave out the first SECONDS of the estimates, whatever their "
                        "flags (default 0: rows flagged warm-up, which the estimator holds "
                        "until its std has converged, and NaN rows are always left out)")
    p.add_argument("--until", type=float, default=None, metavar="SECONDS",
                   help="also leave out the rows from SECONDS after the first one on (with "
                        "--skip: a window, e.g. --until 1 the first second)")
    p.add_argument("--warmup", action="store_true",
                   help="score the rows flagged warm-up too (the stated std's coverage "
                        "during start-up)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def main(argv=None) -> int:
    """Entry point: prints the table; returns 0, or 2 with a message on bad input."""
    args = build_parser().parse_args(argv)
    cols = [c.strip() for c in args.columns.split(",")] if args.columns else None
    try:
        table = score(args.output, args.truth, band=tuple(args.band) if args.band else None,
                      columns=cols, skip=args.skip, until=args.until, warmup=args.warmup)
    except ValueError as exc:
        print(f"vsense-offline score: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(table.to_dict(), indent=1) if args.json else table.format())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
