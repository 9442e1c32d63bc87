"""The tare of strain-gauge channels (docs/strain-gauges.md): at start (``[[channels]]
tare_samples``) each channel's offset is the mean of its first samples with the structure at
rest (zero strain); on demand, the ``tare`` command (:func:`register_tare_command`) takes the
mean of the bridge channels' next samples as their new offsets."""

from __future__ import annotations

import numpy as np

from edge.daemon.commands import DEFERRED, Command, CommandError

#: a re-tare that has not seen its samples' count of finite values after this many times
#: that many rows (a channel in fault: NaN) gives up and says which channel
RETARE_PATIENCE = 4
#: the longest re-tare accepted [s of samples]
RETARE_MAX_S = 60.0


class TareAcquisition:
    """Wrap an acquisition: each channel with ``n[c] > 0`` has the mean of its first ``n[c]``
    finite samples subtracted (the structure at rest: zero strain). During those samples the
    running mean is subtracted (the first sample reads 0), afterwards the frozen mean; the
    offsets are in ``offset`` (physical units) and ``done`` says when all are frozen."""

    def __init__(self, acq, n):
        self.acq = acq
        self.n = np.asarray(n, dtype=np.int64)
        self.count = np.zeros(self.n.size, dtype=np.int64)
        self.total = np.zeros(self.n.size)
        self.offset = np.zeros(self.n.size)
        self.pending = None  # the re-tare under way (:meth:`retare`)

    def __getattr__(self, name):  # the wrapped acquisition's other attributes
        return getattr(self.acq, name)

    @property
    def done(self) -> bool:
        return bool(np.all(self.count >= self.n))

    def retare(self, n, on_done) -> None:
        """Start a tare of the channels with ``n[c] > 0`` over their next ``n[c]`` finite
        samples; the current offsets stay subtracted meanwhile (the estimate goes on). When
        all are in, the means become the new offsets and ``on_done(previous, None)`` is
        called (``previous``: the offsets before); a channel that has not seen its count after
        ``RETARE_PATIENCE`` times as many rows keeps its old offset and ``on_done(previous,
        [channel indices])`` is called. ``RuntimeError`` while a tare is running."""
        if not self.done or self.pending is not None:
            raise RuntimeError("a tare is running")
        n = np.asarray(n, dtype=np.int64)
        self.pending = {"n": n, "count": np.zeros(n.size, np.int64), "total": np.zeros(n.size),
                        "rows": 0, "on_done": on_done}

    def _collect(self, Y) -> int:
        """Add the raw rows ``Y`` to the re-tare and subtract the old offsets from those it
        takes (all of them, or up to the row that completes it, then switch to the new
        offsets); returns the number of rows taken."""
        p = self.pending
        j = collect_rows(Y, p["n"], p["count"], p["total"])
        p["rows"] += j
        Y[:j] -= self.offset
        short = np.flatnonzero(p["count"] < p["n"])
        if short.size and p["rows"] < RETARE_PATIENCE * int(p["n"].max()):
            return j
        previous = self.offset.copy()
        ok = (p["n"] > 0) & (p["count"] >= p["n"])
        self.offset[ok] = p["total"][ok] / p["count"][ok]
        self.pending = None
        p["on_done"](previous, short.tolist() if short.size else None)
        return j

    def read(self, values, t_ns, flags) -> int:
        k = self.acq.read(values, t_ns, flags)
        if not self.done:
            tare_rows(values[:k], self.n, self.count, self.total, self.offset)
            return k
        Y = values[:k]
        if self.pending is not None and k:
            Y = Y[self._collect(Y):]  # the rows after the re-tare: its new offsets
        Y -= self.offset
        return k


def _add_row(y, n, count, total) -> None:
    """Per channel ``c`` of the row ``y``: while ``count[c] < n[c]`` add a finite sample to
    ``total[c]`` and count it."""
    for c in range(y.shape[0]):
        if count[c] < n[c] and np.isfinite(y[c]):
            count[c] += 1
            total[c] += y[c]


def tare_rows(Y, n, count, total, offset) -> None:
    """In place: per channel, while ``count < n`` add each finite sample to ``total`` and set
    ``offset = total / count`` (the running mean), then subtract ``offset`` from the sample."""
    for r in range(Y.shape[0]):
        _add_row(Y[r], n, count, total)
        for c in range(Y.shape[1]):
            if count[c]:
                offset[c] = total[c] / count[c]
            Y[r, c] -= offset[c]


def collect_rows(Y, n, count, total) -> int:
    """Per channel, while ``count < n`` add each finite sample of ``Y`` to ``total``; returns
    the number of rows up to the one at which every count reached ``n`` (all rows if not)."""
    for r in range(Y.shape[0]):
        _add_row(Y[r], n, count, total)
        if np.all(count >= n):
            return r + 1
    return Y.shape[0]


# ----------------------------------------------------------------- the tare command
def _cmd_tare(d, args: dict):
    """``tare`` (``args: {"samples"?: int}``): re-tare the bridge channels over their next
    ``samples`` samples (default: each channel's ``tare_samples``, else one second), the
    structure at rest. The reply comes when the samples are in: the new and the previous
    offset of each channel; the estimator is reset then (the channels' zero moved)."""
    acq = d.acq
    bridges = [c for c, ch in enumerate(d.cfg.channels) if ch.get("bridge")]
    if not isinstance(acq, TareAcquisition) or not bridges:
        raise CommandError("no bridge channel to tare ([[channels]] bridge)")
    top = int(RETARE_MAX_S * d.rate)
    if "samples" in args and not 1 <= args["samples"] <= top:
        raise CommandError(f"tare: samples must be 1 .. {top} ({RETARE_MAX_S:g} s), got "
                           f"{args['samples']}")
    if not acq.done or acq.pending is not None:
        raise CommandError("a tare is running; wait for its reply")
    n = np.zeros(acq.n.size, np.int64)
    for c in bridges:
        n[c] = args.get("samples") or d.cfg.channels[c]["tare_samples"] or round(d.rate)
    cid = d.command_id
    names = [d.cfg.channels[c]["name"] for c in range(n.size)]

    def done(previous, short):
        def finish(d, _args):
            if short is not None:
                raise CommandError("tare: too few finite samples on " + ", ".join(
                    names[c] for c in short) + " (in fault?); their offsets are unchanged")
            d.reset()  # the channels' zero moved: the state is stale
            return {"tare": {names[c]: {"offset": float(acq.offset[c]),
                                        "previous": float(previous[c]),
                                        "samples": int(n[c])} for c in bridges}}
        d.later(Command("tare", finish), cid)

    acq.retare(n, done)
    return DEFERRED


def register_tare_command(reg) -> None:
    """``tare`` in the command registry ``reg`` (idempotent)."""
    if "tare" not in reg.commands:
        reg.register("tare", _cmd_tare, args={"samples": int},
                     doc="re-tare the bridge channels (structure at rest); replies when done")


__all__ = ["TareAcquisition", "collect_rows", "register_tare_command", "tare_rows"]
