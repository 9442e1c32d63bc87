"""The names ``offline`` and ``edge`` agree on, defined once (``offline`` imports them).

Flag bits live in :mod:`edge.flags`, the DOF names in :data:`edge.DOF_NAMES`; this module
holds the other enumerations of the bundle contract and the defaults both halves use.
A bundle stores a signal kind as its index in :data:`SIGNAL_KINDS` (``channel_kind``,
``output_kind``) and the estimator choices below as strings (schema 3).
"""

from __future__ import annotations

#: What a sensor channel or a virtual output measures; the bundle stores the index.
#: ``strain`` and ``stress`` (appended: the old indices keep their meaning) are virtual
#: outputs whose row is a linear functional of the displacements (docs/modelfile.md).
SIGNAL_KINDS = ("displacement", "velocity", "acceleration", "strain", "stress")
#: Signal kind -> code stored in ``channel_kind`` / ``output_kind``.
KIND_CODE = {k: i for i, k in enumerate(SIGNAL_KINDS)}
#: Signal kind -> time-derivative order of the state it reads: ``row @ u`` (0), ``row @ v``
#: (1) or ``row @ a`` (2). A strain or stress row reads the displacements.
KIND_ORDER = {"displacement": 0, "velocity": 1, "acceleration": 2, "strain": 0, "stress": 0}
#: Kinds whose row is a strain/stress functional (outputs only; a channel is one DOF).
FIELD_KINDS = ("strain", "stress")

#: Time discretisation of the reduced model: Newmark-beta (paper) or exact with a
#: first-order hold on the force (bundle field ``discretization``).
DISCRETIZATIONS = ("newmark", "foh")
#: Penalty on the forces (paper eq. 20) or on their increments (bundle field ``regularization``).
REGULARIZATIONS = ("tikhonov0", "tikhonov1")
#: Estimators a bundle may carry (``meta["estimator"]["method"]``).
ESTIMATOR_METHODS = ("tikhonov", "smoother")

#: Model-order reduction methods and the defaults when a model file has no ``[reduction]``;
#: "auto": GMR+, or "cb+r" where the build finds GMR+'s reduced model off at a sensor or an
#: output (offline/reduction_choice.py); every path other than the build reduces with GMR+.
REDUCTION_METHODS = ("auto", "gmr+", "cb+r", "cb", "guyan")
DEFAULT_REDUCTION_METHOD = "auto"
AUTO_REDUCTION_BASE = "gmr+"
DEFAULT_REDUCTION_MODES = 50


def kind_order(kind) -> int:
    """Time-derivative order (0 u, 1 v, 2 a) of a kind name or of its bundle code."""
    if not isinstance(kind, str):
        kind = SIGNAL_KINDS[int(kind)]
    return KIND_ORDER[kind]


def kind_code(kind: str, what: str = "signal") -> int:
    """Code of a signal kind; ``ValueError`` naming ``what`` for an unknown one."""
    try:
        return KIND_CODE[kind]
    except (KeyError, TypeError):
        raise ValueError(f"{what}: kind {kind!r} is not one of {', '.join(SIGNAL_KINDS)}") from None
