"""The Craig-Bampton basis ``T_0 = [[I, 0], [Y, Psi_d]]`` (paper 004 eq. 4b; reference 33).

Masters keep their physical displacements; the slaves are the static response to the masters
(constraint modes ``Y``, :mod:`.guyan`) plus ``N_d`` fixed-interface modes ``Psi_d`` (slave
eigenproblem eq. 5 with the masters held, :mod:`.eigen`).
"""

from __future__ import annotations

import numpy as np

from .partition import Partition, embed


def craig_bampton_basis(part: Partition, Y: np.ndarray, Psi: np.ndarray) -> np.ndarray:
    """Craig-Bampton transformation in model DOF order.

    Parameters
    ----------
    part : Partition
        Master/slave blocks (``Nm`` masters, ``Ns`` slaves).
    Y : ndarray, shape (Ns, Nm)
        Constraint modes.
    Psi : ndarray, shape (Ns, Nd)
        Dominant fixed-interface slave modes, mass-normalised.

    Returns
    -------
    T0 : ndarray, shape (N, Nm + Nd)
        ``u = T0 [u_m; q_s]``.
    """
    nm, nd = part.m.size, Psi.shape[1]
    if Y.shape != (part.s.size, nm) or Psi.shape[0] != part.s.size:
        raise ValueError(f"Y {Y.shape} / Psi {Psi.shape} do not match {part.s.size} slaves and "
                         f"{nm} masters")
    # T0 = [[I, 0], [Y, Psi_d]]   (eq. 4b)
    T_m = np.hstack([np.eye(nm), np.zeros((nm, nd))])
    T_s = np.hstack([Y, Psi])
    return embed(part, T_m, T_s)
