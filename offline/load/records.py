"""The records of the structure in operation that the load model is learned from
(``vsense-offline build --record RUN.csv``): read, and checked before the fit (sample interval,
length, finite values, no dead sensor), each error naming the file and the column.
"""

from __future__ import annotations

import numpy as np

from edge.csvio import read_table


#: shortest record the load fit takes [s]: seven Welch segments of at least half a second
#: and the second of filter start-up the innovation check leaves out
MIN_RECORD_S = 4.0


def read_records(paths, channel_names, dt: float) -> list[np.ndarray]:
    """The sensor columns of each record ``(n_i, nch)``, in ``channel_names`` order; errors
    name the file and the column. The sample interval must be the model's, a record at least
    :data:`MIN_RECORD_S` long, and no column constant (a dead sensor)."""
    out = []
    for p in paths:
        t, data, names = read_table(p)
        missing = [c for c in channel_names if c not in names]
        if missing:
            raise ValueError(f"{p}: no column {', '.join(repr(m) for m in missing)} (a record "
                             f"has 'time' and one column per [[sensors]] entry: "
                             f"{', '.join(channel_names)}; found {', '.join(names)})")
        Y = data[:, [names.index(c) for c in channel_names]]
        if not np.all(np.isfinite(Y)):
            bad = int(np.sum(~np.all(np.isfinite(Y), axis=1)))
            raise ValueError(f"{p}: {bad} row(s) with a missing or non-finite sensor value; "
                             f"cut the record where the sensors are valid")
        if t.size < 2:
            raise ValueError(f"{p}: fewer than two samples")
        step = np.diff(t)
        if np.max(np.abs(step - dt)) > 1e-3 * dt:
            raise ValueError(f"{p}: sample interval {np.median(step):.6g} s, but the model's "
                             f"[estimator] rate gives {dt:.6g} s (resample the record or set "
                             f"the rate)")
        if t.size * dt < MIN_RECORD_S:
            raise ValueError(f"{p}: {t.size * dt:.4g} s is too short for the load fit (at "
                             f"least {MIN_RECORD_S:g} s; 20 s or more of steady operation "
                             f"is a good record)")
        dead = [c for c, col in zip(channel_names, Y.T) if np.ptp(col) == 0.0]
        if dead:
            raise ValueError(f"{p}: column {', '.join(repr(c) for c in dead)} is constant (a "
                             f"dead or disconnected sensor): repair it, or leave that "
                             f"[[sensors]] entry out of the model file")
        out.append(Y)
    return out


def unidentified_noise(declared: float, learned: float) -> str:
    """The note of a sensor noise the records do not determine (its Laplace posterior as
    wide as its prior): kept near the declaration, or moved by the fit all the same (a
    plate of a docs-only user test: 0.02 -> 0.209, which "kept near the declaration" hid)."""
    r = learned / declared if declared > 0 else np.inf
    if 1 / 1.5 <= r <= 1.5:
        return "  [not identified: kept near the declaration]"
    return (f"  [not identified: the records do not determine it, yet the fit moved it "
            f"{r:.2g}x the declaration (load above half the rate folded into the channel, or a "
            f"load shape the model lacks); check the sensor's noise_std]")
