"""Inverse map as a Gaussian process (a mean and a standard deviation per parameter).

scikit-learn ``GaussianProcessRegressor`` on min-max normalised features and parameters, kernel
``C * RBF(l) + White`` (one length scale shared by all features: the RBF form that ``skl2onnx``
exports with ``return_std``), hyperparameters by maximum marginal likelihood. One GP per
parameter, so each parameter gets its own length scale and noise level (and because skl2onnx's
``return_std`` graph handles one output only).
"""

from __future__ import annotations

import numpy as np

from offline._deps import need
from offline.inverse.mlp import TrainedMap, _check_xy, normalisation, targets


def train_gp(X, Y, X_val=None, Y_val=None, seed: int = 0, n_restarts: int = 0,
             max_train: int = 1500, log_targets: bool = True) -> TrainedMap:
    """Train the GP inverse map.

    Parameters
    ----------
    X, Y : (S, nf), (S, np)    training features and parameters [SI] (at most ``max_train``
                               rows: the GP costs O(S³))
    X_val, Y_val : optional     validation set, used only for ``sigma_val``
    """
    gpm = need("sklearn.gaussian_process")
    kern = need("sklearn.gaussian_process.kernels")
    X, Y = _check_xy(X, Y, "training set")
    Y = targets(Y, log_targets)
    if len(X) > max_train:
        raise ValueError(f"GP training set has {len(X)} samples; at most {max_train} (O(S^3) cost)")
    x_min, x_scale, y_min, y_range = normalisation(X, Y)
    Xn, Yn = (X - x_min) * x_scale, (Y - y_min) / y_range
    d = Xn.shape[1]
    Ym = Yn.mean(axis=0)
    gps, info = [], []
    for j in range(Yn.shape[1]):
        kernel = (kern.ConstantKernel(0.1, (1e-3, 1e2))
                  * kern.RBF(length_scale=np.sqrt(d), length_scale_bounds=(0.05 * np.sqrt(d), 1e3))
                  + kern.WhiteKernel(1e-4, (1e-9, 1e-2)))
        gp = gpm.GaussianProcessRegressor(kernel=kernel, normalize_y=False,
                                          n_restarts_optimizer=n_restarts, random_state=seed)
        gp.fit(Xn, Yn[:, j] - Ym[j])
        gps.append(gp)
        info.append(str(gp.kernel_))
    # each GP is fitted to the centred column: fold the centring into the output offset
    tm = TrainedMap("gp", gps, x_min, x_scale, y_min + y_range * Ym, y_range, np.zeros(Y.shape[1]),
                    {"kernels": info}, log_targets=log_targets)
    if X_val is not None:
        X_val, Y_val = _check_xy(X_val, Y_val, "validation set")
        tm.sigma_val = (tm.predict(X_val) - Y_val).std(axis=0, ddof=1)
    return tm
