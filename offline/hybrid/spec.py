"""The ``[hybrid]`` table of the model file: where the neural correction acts, its size, its
training settings (docs/hybrid.md)."""

from __future__ import annotations

from dataclasses import dataclass

from offline.model.table import ModelFileError, Table

#: keys of ``[hybrid]``
KEYS = ("select", "dofs", "modes", "max_hz", "inputs", "linear_kept", "hidden", "layers", "epochs", "optimizer", "learning_rate", "horizon",
        "stride", "patience", "margin", "seed", "restarts")


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
                            [Hz] only, the others answer it quasi-statically (default a
                            quarter of the rate; ``offline.hybrid.discrete.hybrid_model`` says
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
    margin: float = 0.05
    seed: int = 0
    restarts: int = 1


def parse_hybrid(spec) -> HybridSpec:
    """The ``[hybrid]`` table of a model spec (defaults when it has none)."""
    raw = spec.raw.get("hybrid")
    if raw is None:
        return HybridSpec()
    t = Table(raw, spec.where("[hybrid]"), keys=KEYS)
    sel = t.get("select", "table", default=None)
    dofs = t.get("dofs", "any", default=["uz"])
    dofs = (dofs,) if isinstance(dofs, str) else tuple(dofs)
    if sel is None and t.has("dofs"):
        raise ModelFileError(f"{t.key('dofs')}: needs a select (where the correction acts)")
    inputs = t.get("inputs", "list", default=["displacement", "velocity"])
    bad = [i for i in inputs if i not in ("displacement", "velocity")]
    if bad or not inputs or len(set(inputs)) != len(inputs):
        raise ModelFileError(f"{t.key('inputs')}: a non-empty list of distinct "
                             f"\"displacement\", \"velocity\" (got {inputs!r})")
    return HybridSpec(
        select=sel, dofs=dofs, inputs=tuple(inputs),
        modes=t.get("modes", "int", default=3, lo=1),
        max_hz=t.get("max_hz", default=None, lo=0.0, lo_open=True),
        linear_kept=t.get("linear_kept", "bool", default=True),
        hidden=t.get("hidden", "int", default=16, lo=1, hi=256),
        layers=t.get("layers", "int", default=2, lo=1, hi=4),
        epochs=t.get("epochs", "int", default=400, lo=1),
        optimizer=t.get("optimizer", "str", default="lbfgs", choices=("lbfgs", "adam")),
        learning_rate=t.get("learning_rate", default=1e-3, lo=0.0, lo_open=True),
        horizon=t.get("horizon", "int", default=100, lo=2),
        stride=t.get("stride", "int", default=25, lo=1),
        patience=t.get("patience", "int", default=40, lo=1),
        margin=t.get("margin", default=0.05, lo=0.0),
        seed=t.get("seed", "int", default=0),
        restarts=t.get("restarts", "int", default=1, lo=1, hi=20))
