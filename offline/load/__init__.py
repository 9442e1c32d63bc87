"""The load and noise models of the estimator: declared in the model file, or learned from
the structure's own records (``vsense-offline build MODEL.toml --record RUN.csv``).

Files, by mathematical object: `model` (the joint force spectrum and the sensor noise: a
:class:`LoadModel`), `declared` (the model file's declaration, the prior), `welch` (the
records' cross-spectral matrices), `whittle` (the frequency-domain likelihood and its
maximisation), `learn` (records in, fitted load model and its summary out), `select` (the
candidates chosen by held-out likelihood), `split` (what the records tell of the loads' split,
and the declared split at the records' level and shape), `plots`.
"""

from offline.load.declared import declared_load_model
from offline.load.learn import LoadFit, learn_load, read_records
from offline.load.model import LoadModel

__all__ = ["LoadFit", "LoadModel", "declared_load_model", "learn_load", "read_records"]
