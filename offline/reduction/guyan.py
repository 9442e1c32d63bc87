"""Constraint modes and the Guyan (static condensation) basis.

Paper 004 eq. 4c: ``Y = -K_ss^-1 K_sm``; Guyan's basis is ``T_G = [I; Y]`` (reference 36 of
the paper).

With a singular ``K_ss`` (slave set with rigid-body motion ``R``: masters that do not
restrain the structure) the columns of ``K_sm`` are still orthogonal to ``R`` (``K`` positive
semi-definite), so ``K_ss Y = -K_sm`` is solvable; ``Y`` is then the solution M-orthogonal to
``R`` (see :class:`.flexibility.Flexibility.static`), unique up to the rigid slave modes, which
the Craig-Bampton/GMR+ bases contain anyway. Guyan alone cannot represent them and refuses.
"""

from __future__ import annotations

import numpy as np

from offline._deps import progress as _progress

from .flexibility import Flexibility
from .partition import Partition, embed

#: Columns per block of right-hand sides in the constraint-mode solves.
BLOCK = 64


def constraint_modes(part: Partition, flex: Flexibility, block: int = BLOCK,
                     progress: bool = False) -> np.ndarray:
    """Constraint modes ``Y = -K_ss^-1 K_sm`` (eq. 4c), solved in blocks of columns.

    Parameters
    ----------
    part : Partition
        Master/slave blocks.
    flex : Flexibility
        Slave flexibility (holds the factorisation of ``K_ss - sigma M_ss``).
    block : int
        Right-hand sides solved per call.
    progress : bool
        Show a progress bar over the blocks.

    Returns
    -------
    Y : ndarray, shape (Ns, Nm)
        Slave displacement per unit master displacement.
    """
    nm = part.m.size
    Y = np.empty((part.s.size, nm), dtype=np.float64)
    starts = range(0, nm, block)
    bar = _progress(starts, total=len(starts), desc="constraint modes", enable=progress)
    for j0 in bar:
        j1 = min(nm, j0 + block)
        # Y = -K_ss^-1 K_sm   (eq. 4c; columns j0:j1)
        Y[:, j0:j1] = -flex.static(part.K_sm[:, j0:j1].toarray())
    return Y


def guyan_basis(part: Partition, Y: np.ndarray) -> np.ndarray:
    """Guyan transformation ``T_G = [I; Y]`` in model DOF order.

    Returns
    -------
    ndarray, shape (N, Nm)
    """
    return embed(part, np.eye(part.m.size), Y)
