"""Inverse maps on the edge: capture an experiment, extract features, infer parameters with
ONNX Runtime, update the estimator's model (IMPU, paper file 000, Sect. 2.2.3).

Three layers, each its own module:

* :mod:`edge.inverse.parametric` – the parametric reduced model ``M̂(θ), Ĉ(θ), K̂(θ)`` and the
  known excitation (pure NumPy; :mod:`offline.inverse` builds on it);
* :mod:`edge.inverse.runtime` – the ONNX maps of a bundle (:class:`InverseRuntime`: sessions
  and check sets at start-up, window capture, identification, training bounds);
* :mod:`edge.inverse.update` – parameters (identified, sent, or a calibration posterior) to
  a new estimator step operator;
* :mod:`edge.inverse.hook` – the daemon glue (:class:`InverseHook`, acting only through the
  :class:`InversePort` the daemon hands it) and the ``identify`` / ``update_model`` commands.

Never imports :mod:`offline` or scipy; ``onnxruntime`` is imported where a session is created.
"""

from edge.inverse.hook import (InverseHook, InversePort, _cmd_identify,  # noqa: F401
                               _cmd_update_model, register_commands)
from edge.inverse.parametric import (EXCITATIONS, PARAM_KINDS, PARTS_KEYS,  # noqa: F401
                                     InverseMapError, Parts, RejectedUpdate, check_parameters,
                                     damping_ratio, excitation_signal, mass_stiffness, matrices,
                                     modal, rayleigh_ab, rayleigh_coefficients)
from edge.inverse.runtime import (BOUNDS_MARGIN, CHECK_TOL, InverseMap,  # noqa: F401
                                  InverseRuntime, WindowCapture, check_bounds, map_names,
                                  parameter_bounds, range_flags)
from edge.inverse.update import (MAX_NONLINEARITY, calibration_params, model_id,  # noqa: F401
                                 update_model)
