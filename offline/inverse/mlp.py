"""Inverse map as a multilayer perceptron (paper 000, Sect. 2.2.1-2.2.2, 4.1.3).

scikit-learn ``MLPRegressor``: ReLU hidden layers, linear output, Adam, squared-error loss,
mini-batches; min-max normalisation of features and parameters to [0, 1] with the training
bounds (Appendix A); patience-based early stopping on a separate validation set, keeping the
weights of the epoch with the lowest validation loss.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field

import numpy as np

from offline._deps import need, progress as _progress


@dataclass
class TrainedMap:
    """A trained inverse map with its normalisation.

    Attributes
    ----------
    kind : str                "mlp" or "gp"
    model : sklearn regressor trained on normalised data (GP: one per parameter)
    x_min, x_scale : (nf,)    x_norm = (x - x_min) * x_scale
    y_min, y_range : (np,)    p = y_min + y_range * y_norm
    sigma_val : (np,)         std of the validation residuals [SI] (uncertainty of the MLP)
    history : dict            training/validation loss per epoch, best epoch
    log_targets : bool        the map learns log(p) (min-max normalised): the training loss
                              then weighs relative errors, as eq. 18 does
    """

    kind: str
    model: object
    x_min: np.ndarray
    x_scale: np.ndarray
    y_min: np.ndarray
    y_range: np.ndarray
    sigma_val: np.ndarray
    history: dict = field(default_factory=dict)
    log_targets: bool = False

    def normalise(self, X):
        # x_nor = (x - x_min) / (x_max - x_min)   (paper 000, Appendix A)
        return (np.asarray(X, np.float64) - self.x_min) * self.x_scale

    def predict(self, X, return_std: bool = False):
        """Parameters [SI] (S, np); with ``return_std`` also their standard deviation (S, np)."""
        Xn = self.normalise(np.atleast_2d(X))
        if self.kind == "gp":
            out = [g.predict(Xn, return_std=True) for g in self.model]
            mu = np.stack([o[0].reshape(-1) for o in out], axis=1)
            sd = np.stack([o[1].reshape(-1) for o in out], axis=1)
        else:
            mu = self.model.predict(Xn).reshape(len(Xn), -1)
            sd = np.zeros_like(mu)  # replaced by sigma_val below
        p = self.y_min + self.y_range * mu
        sd = sd * self.y_range
        if self.log_targets:
            # p = exp(log p);  std(p) ≈ p std(log p)   (first-order propagation)
            p = np.exp(p)
            sd = p * sd
        if self.kind == "mlp":  # validation-residual standard deviation [SI], per parameter
            sd = np.broadcast_to(np.asarray(self.sigma_val, np.float64), p.shape).copy()
        return (p, sd) if return_std else p


def normalisation(X, Y):
    """Min-max bounds of training features and parameters: (x_min, x_scale, y_min, y_range)."""
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    x_min, x_max = X.min(axis=0), X.max(axis=0)
    rng = x_max - x_min
    x_scale = np.where(rng > 0, 1.0 / np.where(rng > 0, rng, 1.0), 1.0)
    y_min, y_max = Y.min(axis=0), Y.max(axis=0)
    y_range = np.where(y_max > y_min, y_max - y_min, 1.0)
    return x_min, x_scale, y_min, y_range


def targets(Y, log_targets: bool, what: str = "training set"):
    """Parameters as learned: ``log(Y)`` when ``log_targets`` (all must be > 0)."""
    Y = np.asarray(Y, np.float64)
    if not log_targets:
        return Y
    if np.any(Y <= 0):
        j = int(np.argwhere(Y <= 0)[0, 1])
        raise ValueError(f"{what}: log_targets needs positive parameters; column {j} has values <= 0 "
                         "(e.g. an added mass with lower bound 0): use log_targets=False")
    return np.log(Y)


def _check_xy(X, Y, what):
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"{what}: features (S, nf) and parameters (S, np) needed, got {X.shape}, {Y.shape}")
    for lab, A in (("features", X), ("parameters", Y)):
        if not np.isfinite(A).all():
            raise ValueError(f"{what}: {lab} contain {int((~np.isfinite(A)).sum())} non-finite values "
                             "(time_extrema: fewer extrema than n_extrema in some window?)")
    return X, Y


def train_mlp(X, Y, X_val, Y_val, hidden=(64, 64), max_epochs: int = 400, patience: int = 40,
              batch_size: int = 50, learning_rate: float = 1e-3, alpha: float = 1e-6,
              seed: int = 0, log_targets: bool = True, lr_drops: int = 2,
              progress: bool = True) -> TrainedMap:
    """Train the MLP inverse map.

    Parameters
    ----------
    X, Y : (S, nf), (S, np)      training features and parameters [SI]
    X_val, Y_val : (Sv, nf), (Sv, np)   validation set (early stopping only)
    hidden : tuple of int        neurons per ReLU hidden layer
    patience : int               epochs without validation improvement before stopping (n_es),
                                 after ``lr_drops`` restarts from the best weights with the
                                 learning rate divided by 10 each time
    seed : int                   weight initialisation and batch shuffling
    """
    nn = need("sklearn.neural_network")
    X, Y = _check_xy(X, Y, "training set")
    X_val, Y_val = _check_xy(X_val, Y_val, "validation set")
    Yv_si = Y_val  # validation targets in SI units, before the log transform
    Y, Y_val = targets(Y, log_targets), targets(Y_val, log_targets, "validation set")
    if X_val.shape[1] != X.shape[1]:
        raise ValueError(f"validation features have {X_val.shape[1]} columns, training {X.shape[1]}")
    x_min, x_scale, y_min, y_range = normalisation(X, Y)
    Xn, Yn = (X - x_min) * x_scale, (Y - y_min) / y_range
    Xv, Yv = (X_val - x_min) * x_scale, (Y_val - y_min) / y_range
    mlp = nn.MLPRegressor(hidden_layer_sizes=tuple(hidden), activation="relu", solver="adam",
                          batch_size=min(batch_size, len(Xn)), learning_rate_init=learning_rate,
                          alpha=alpha, random_state=seed, shuffle=True, max_iter=1, tol=0.0)
    best, best_loss, best_epoch, wait = None, np.inf, -1, 0
    hist_tr, hist_val = [], []
    lr, drops = learning_rate, 0
    bar = _progress(total=max_epochs, desc="training MLP", enable=progress)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in range(max_epochs):
            mlp.partial_fit(Xn, Yn)  # one epoch of Adam over shuffled mini-batches
            # validation loss: MSE of the normalised parameters (eq. 9 averaged)
            lv = float(np.mean((mlp.predict(Xv).reshape(Yv.shape) - Yv) ** 2))
            hist_tr.append(float(mlp.loss_)); hist_val.append(lv)
            bar.update(1)
            if lv < best_loss:
                best_loss, best_epoch, wait = lv, epoch, 0
                best = (copy.deepcopy(mlp.coefs_), copy.deepcopy(mlp.intercepts_))
            else:
                wait += 1
                if wait >= patience:
                    if drops >= lr_drops:
                        break
                    # plateau: restart from the best weights with a 10x smaller step
                    drops, wait, lr = drops + 1, 0, lr * 0.1
                    mlp.coefs_, mlp.intercepts_ = copy.deepcopy(best[0]), copy.deepcopy(best[1])
                    mlp._optimizer.learning_rate_init = lr
    bar.close()
    mlp.coefs_, mlp.intercepts_ = best
    tm = TrainedMap("mlp", mlp, x_min, x_scale, y_min, y_range, np.zeros(Y.shape[1]),
                    {"train_loss": hist_tr, "val_loss": hist_val, "best_epoch": best_epoch,
                     "epochs": len(hist_val), "lr_drops": drops}, log_targets=log_targets)
    # uncertainty of the MLP: std of the validation residuals [SI]
    tm.sigma_val = (tm.predict(X_val) - Yv_si).std(axis=0, ddof=1)
    return tm
