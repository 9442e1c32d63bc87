"""What commands and plug-ins may do to a running daemon: the controller interface.

Command handlers (:mod:`edge.daemon.commands`, the inverse maps' ``identify`` and
``update_model``, the fatigue commands) receive a :class:`Controller` and use only what it
declares; :class:`edge.daemon.loop.Daemon` implements it. Every call runs on the estimating
thread between two samples (commands are drained there), so nothing here needs a lock.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Controller(Protocol):
    """The daemon as commands see it.

    Attributes
    ----------
    paused : bool
        Estimation is paused (acquisition and raw recording go on).
    inverse : edge.inverse.hook.InverseHook or None
        The inverse maps' hook; set once at start-up (:meth:`InverseHook.attach`).
    fatigue : edge.fatigue.monitor.FatigueMonitor or None
        The ``[[fatigue]]`` hotspots.
    acq : the acquisition (``edge.daemon.tare.TareAcquisition`` with a bridge channel)
    cfg : edge.daemon.config.Config
    rate : float
        Rows per second the bundle was built for.
    command_id :
        The id of the command being run (a handler that replies later keeps it).
    """

    inverse: Any
    fatigue: Any
    acq: Any
    cfg: Any
    rate: float
    command_id: Any

    @property
    def paused(self) -> bool: ...

    def pause(self) -> None:
        """Stop estimating; status ``paused``."""

    def resume(self) -> None:
        """Estimate again from a reset estimator state (the old one is stale); status back to
        ``running``, ``degraded`` or ``sensor_fault``."""

    def reset(self) -> None:
        """Reset the estimator state (the structure is at rest); counted in health
        ``estimator_resets``."""

    def publish_status(self) -> dict:
        """Re-publish the retained status; return its payload."""

    def health(self) -> dict:
        """The health statistics now (the payload of a health message)."""

    def later(self, command, cid) -> None:
        """Run ``command`` (an :class:`edge.daemon.commands.Command`) between two samples
        as the answer to command ``cid``: how a handler that returned ``DEFERRED`` replies."""
