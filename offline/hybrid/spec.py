"""The ``[hybrid]`` table of the model file: where the neural correction acts, its size, its
training settings (docs/hybrid.md)."""

from __future__ import annotations

from dataclasses import dataclass

from offline.model.experiment import parse_hybrid as parse_hybrid_table
from offline.model.schema_update import HYBRID

#: keys of ``[hybrid]`` (offline/model/schema_update.py)
KEYS = HYBRID.names


@dataclass(frozen=True)
class HybridSpec:
    """Settings of the hybrid twin (``[hybrid]``; all optional).

    Attributes
    ----------
    select : dict or None   node selection where the correction acts (with ``dofs``); None:
                            the correction acts on the ``modes`` lowest modes of the reduced
                            model (modal coordinates)
    dofs : tuple of str     DOF names at the selected nodes (default ``("uz",)``)
    modes : int             modal coordinates used without ``select`` (default 3)
    max_hz : float or None  a correction at ``select`` loads the modes up to this frequency
                            [Hz] only, the others answer it quasi-statically (default half
                            the rate; ``offline.hybrid.discrete.hybrid_model`` says
                            why)
    inputs : tuple of str   the network's inputs at those coordinates: ``"displacement"``,
                            ``"velocity"`` (default both; a stiffness-like nonlinearity needs
                            displacements only, friction velocities)
    linear_kept : bool      the correction minus its value and slope at rest (default true):
                            the linear model stays exact for small motions and the network
                            learns only the amplitude-dependent part (false for a correction
                            that is not smooth at rest, e.g. dry friction)
    hidden : int            neurons per hidden layer (tanh; default 16)
    layers : int            hidden layers (default 2)
    epochs : int            largest number of iterations (epochs; default 400)
    optimizer : str         ``"lbfgs"`` (default; scipy's L-BFGS-B on the JAX gradient) or
                            ``"adam"`` (paper 002)
    learning_rate : float   Adam step (default 1e-3, as paper 002)
    horizon : int           open-loop prediction horizon of the training loss [samples]
    stride : int            samples between the starts of the horizons
    patience : int          epochs without a better validation loss before stopping
    margin : float          the trained envelope: input range of the training records widened
                            by this fraction of its width on each side
    outside : str           beyond the envelope: ``"saturate"`` (default) holds each input
                            at its bound, ``"off"`` applies no correction (bundle
                            ``kf_hy_guard`` 1 / 0)
    seed : int              initial weights
    restarts : int          trainings from the initial weights of ``seed``, ``seed + 1``, ...;
                            the one of the lowest validation loss is kept (default 1)
    """

    select: dict | None = None
    dofs: tuple = ("uz",)
    modes: int = 3
    max_hz: float | None = None
    inputs: tuple = ("displacement", "velocity")
    linear_kept: bool = True
    hidden: int = 16
    layers: int = 2
    epochs: int = 400
    optimizer: str = "lbfgs"
    learning_rate: float = 1e-3
    horizon: int = 100
    stride: int = 25
    patience: int = 40
    margin: float = 0.25
    outside: str = "saturate"
    seed: int = 0
    restarts: int = 1


def parse_hybrid(spec) -> HybridSpec:
    """The ``[hybrid]`` table of a model spec (defaults when it has none), validated through
    the model file's schema (:func:`offline.model.experiment.parse_hybrid`)."""
    if spec.raw.get("hybrid") is None:
        return HybridSpec()
    return HybridSpec(**parse_hybrid_table(spec.raw, spec.where("").rstrip(": ")))
