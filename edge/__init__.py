"""vsense edge package: what runs on the single-board computer.

Imports only NumPy, numba, onnxruntime and paho-mqtt (the latter two lazily, where used).
It never imports :mod:`offline`.
"""

__version__ = "0.1.0"

#: Names of the six nodal degrees of freedom, in this order everywhere (bundle, DOF tables).
DOF_NAMES = ("ux", "uy", "uz", "rx", "ry", "rz")
