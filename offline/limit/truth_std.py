"""The stationary std of each force and output under a load: the normaliser of every
normalised RMS error the build states (its calibration runs' scores, the choice, the ratio to
the limit) and of the accuracy limit itself (offline/limit/ratio.py).

A short run's own std of the truth is a poor normaliser where a target is narrow-band: a
lightly damped mode's response over 2 s (started from rest after a 1 s warm-up) holds a few
cycles of its envelope, so its std scatters from run to run and is biased low. The README
beam's d05 (first mode 8.4 Hz at 1 % damping): its std on the three 2 s runs was 0.80 of the
stationary one, 0.99 over twelve, so the runs read 0.0180 where the same error over the
stationary std is 0.0126 (placement's prediction 0.0127; docs/benchmarks.md).

Per force ``f`` and output ``q``, on the one-sided bins ``k`` of an n-point grid with the
force power ``P_k`` and the outputs' transfer functions ``Hz_k``::

    var_f = sum_k w_k (P_k)_ff,   var_q = sum_k w_k (Hz_k P_k Hz_k^H)_qq

the limit's own ``force_var`` / ``output_var`` (:func:`offline.limit.wiener.wiener_limit`,
a load model's power above half the row rate folded as the limit folds it).
"""

from __future__ import annotations

import numpy as np

from offline.limit.aliases import target_rows
from offline.limit.model import force_spectra, limit_grid
from offline.limit.wiener import wiener_limit


def truth_std(spec, mm, dt: float, loads=None) -> np.ndarray:
    """``(nf + nout,)`` stationary std of each force, then each output, under ``loads`` (a
    load model, default the model file's ``[design_load]`` spectra); ``mm``: the
    :class:`offline.limit.transfer.ModalModel` whose probes are the sensors then the outputs.
    The grid is the limit's (:func:`offline.limit.model.limit_grid`)."""
    loads = force_spectra(spec) if loads is None else loads
    n, (Hy, Hz, P, white) = limit_grid(spec, mm, dt, loads)
    lim = target_rows(loads, len(spec.forces))(wiener_limit(Hy, P, white, n, Hz=Hz))
    return np.sqrt(np.concatenate([lim.force_var, lim.output_var]))
