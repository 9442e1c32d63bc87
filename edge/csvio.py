"""The one CSV reader/writer of vsense: ``time,<names>`` tables in SI units.

Used by replay (edge), the simulated ADC's file source (edge), and simulate / score
(offline). Errors name the file and the line.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np


class CsvError(ValueError):
    """A missing, empty, ragged or non-numeric table."""


def read_table(path, min_rows: int = 1):
    """Read a ``time,<names>`` CSV.

    Returns
    -------
    t : ndarray (n,), data : ndarray (n, m), names : list of m str
    """
    if not str(path):  # Path("") is "." (a directory)
        raise CsvError("the CSV file name is empty")
    path = Path(path)
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as exc:
        raise CsvError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with fh:
        try:
            return _parse(path, csv.reader(fh), min_rows)
        except UnicodeDecodeError as exc:
            raise CsvError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") \
                from None
        except csv.Error as exc:
            raise CsvError(f"{path}: not a CSV table ({exc})") from None
        except OSError as exc:  # opened but not readable: EIO, a directory's EISDIR
            raise CsvError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _parse(path, reader, min_rows):
    """Header and rows of an open CSV reader -> ``(t, data, names)``."""
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise CsvError(f"{path}: empty file (expected a header 'time,...')") from None
    if not header or header[0] != "time":
        raise CsvError(f"{path}: first column must be 'time', header is {header[:5]}")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise CsvError(f"{path}: duplicate columns {dup}")
    rows = []
    for lineno, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise CsvError(f"{path}: line {lineno} has {len(row)} fields, the header has "
                           f"{len(header)}")
        try:
            rows.append([float(c) for c in row])
        except ValueError:
            raise CsvError(f"{path}: line {lineno}: not a number in "
                           f"{','.join(row)[:80]!r}") from None
    if len(rows) < min_rows:
        raise CsvError(f"{path}: needs at least {min_rows} data rows, has {len(rows)}")
    arr = np.array(rows, dtype=np.float64).reshape(len(rows), len(header))
    bad = np.nonzero(~np.isfinite(arr[:, 0]))[0]
    if bad.size:
        raise CsvError(f"{path}: column 'time': not a finite number in data row "
                       f"{int(bad[0]) + 1} ({arr[bad[0], 0]!r})")
    return arr[:, 0], arr[:, 1:], header[1:]


def write_table(path_or_file, t, data, names, extra=None, extra_name=None) -> None:
    """Write ``time,<names>[,<extra_name>]``; floats with repr (round-trip exact)."""
    own = not hasattr(path_or_file, "write")
    fh = open(path_or_file, "w", newline="") if own else path_or_file
    try:
        w = csv.writer(fh)
        w.writerow(["time", *names, *([extra_name] if extra_name else [])])
        for i in range(len(t)):
            row = [repr(float(t[i])), *(repr(float(x)) for x in data[i])]
            if extra is not None:
                row.append(int(extra[i]))
            w.writerow(row)
    finally:
        if own:
            fh.close()
