"""The build report's L-curve figure survives sweeps whose runs grew without bound."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from offline.regularization import AlphaChoice  # noqa: E402


def test_lcurve_plot_of_a_diverging_sweep(tmp_path):
    """Norms up to 1e138 and GCV up to 1e273 (an L-shaped 3-D bracket's L = 41 sweep, where
    every Tikhonov run of the grid grew on a 3 s record) used to raise OverflowError in
    matplotlib's log tick locator and abort ``vsense-offline build --report`` before the
    bundle was written."""
    alphas = np.logspace(-6, 8, 25)
    decay = np.linspace(138.0, 4.0, alphas.size)        # log10 of the norms, as measured
    rho = 10.0 ** decay
    eta = 10.0 ** (decay - 1.0)
    gcv = 10.0 ** np.linspace(273.0, 4.0, alphas.size)
    kap = np.zeros(alphas.size)
    kap[3] = np.nan
    c = AlphaChoice(alphas=alphas, residual_norm=rho, solution_norm=eta, curvature=kap,
                    gcv=gcv, alpha_lcurve=float(alphas[-1]), alpha_gcv=float(alphas[-1]),
                    window=41)
    out = c.plot(tmp_path / "lcurve.png")
    assert (tmp_path / "lcurve.png").stat().st_size > 1000, out
