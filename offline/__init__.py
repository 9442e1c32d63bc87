"""vsense offline package: the workstation path from a model file to a bundle.

May import :mod:`edge` (bundle format, features, kernels); heavy optional packages (scipy,
gmsh, meshio, matplotlib, scikit-learn, skl2onnx) are imported where used, through
:func:`offline._deps.need`, which names the extra to install when one is missing.
"""

from edge import __version__  # one version for the distribution

__all__ = ["__version__"]
