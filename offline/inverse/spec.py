"""The model file's ``[[parameters]]``, ``[experiment]``, ``[inverse]`` as the inverse maps need
them. The tables are validated with the rest of the file, through the model file's schema
(:mod:`offline.model.update`, :mod:`offline.model.experiment`; errors are
:class:`~offline.model.ModelFileError` naming the file and the key path); here the maps'
requirements are added: at least one parameter and the experiment::

    [[parameters]]  name = "E"      kind = "modulus"        material = "aluminium"  bounds = [60e9, 78e9]
    [[parameters]]  name = "zeta"   kind = "damping_ratio"  bounds = [0.005, 0.03]   modes = [1, 2]
    [[parameters]]  name = "k_root" kind = "spring"         spring = "root"         bounds = [20.0, 200.0]
    [[parameters]]  name = "m_tip"  kind = "mass"           mass = "tip"            bounds = [0, 0.005]
    [experiment]    excitation = { type = "pulse", amplitude = 1.0, width = 0.002, at = "f_tip" }
                    initial = "rest"  duration = 0.5  rate = 1000.0  channels = ["d110"]  noise = 0.01
    [inverse]       samples = 1000  test_samples = 1000  features = "fft_bins"  map = "mlp"  seed = 0
"""

from __future__ import annotations

from offline.model import experiment as _exp
from offline.model import update as _upd
from offline.model.experiment import Experiment, InverseSettings  # noqa: F401
from offline.model.schema_update import MAPS  # noqa: F401
from offline.model.table import ModelFileError
from offline.model.update import ParameterSpec  # noqa: F401


def parse_parameters(raw: dict, where: str = "model") -> list:
    """``[[parameters]]`` -> list of :class:`ParameterSpec` (at least one)."""
    if not raw.get("parameters"):
        raise ModelFileError(f"{where}: no [[parameters]] table: the inverse maps need "
                             "updating parameters")
    return _upd.parse_parameters(raw, where)


def parse_experiment(raw: dict, where: str = "model") -> Experiment:
    """``[experiment]`` -> :class:`Experiment`."""
    if "experiment" not in raw:
        raise ModelFileError(f"{where}: [experiment] table is missing: the inverse maps need "
                             "the known experiment")
    return _exp.parse_experiment(raw, where)


def parse_inverse(raw: dict, where: str = "model") -> InverseSettings:
    """``[inverse]`` -> :class:`InverseSettings` (defaults when the table is absent)."""
    return _exp.parse_inverse(raw, where)


def parse(raw: dict, where: str = "model"):
    """All three sections: (parameters, experiment, settings)."""
    return parse_parameters(raw, where), parse_experiment(raw, where), parse_inverse(raw, where)
